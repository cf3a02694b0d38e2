"""Routing on a real Citus cluster (tests/support/citus.py): with pgrag's schema
distributed by collection (migration 0018 + `PGRAG_DISTRIBUTED=true`), a collection-scoped
kNN or full-text query runs on one shard with the shard's HNSW or GIN index, an unscoped
one fans out to every shard and still returns the exact nearest neighbours, and a large
tenant can be isolated to its own shard (docs/scale-out.md).
"""

from __future__ import annotations

import asyncio
import re

import psycopg
import pytest

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.settings import load_settings
from tests.support.citus import (
    CitusCluster,
    explain,
    fresh_database,
    ingested_database,
    logged_search,
    migrate,
    task_count,
    three_collections,
)

DIMS = 8


def _vec(i: int) -> str:
    return "[" + ",".join(str(((i * 7 + k * 13) % 17) / 17 - 0.4) for k in range(DIMS)) + "]"


@pytest.fixture(scope="module")
def distributed_dsn(citus: CitusCluster) -> str:
    """Synthetic data (3 collections x 40 documents x 10 chunks, 8-dim vectors, an HNSW
    index per set) in a database distributed by migrate, written as pgrag writes it."""
    url = fresh_database(citus)
    asyncio.run(migrate(url, True))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO pgrag.collections (name) VALUES ('a'), ('b'), ('c')")
        conn.execute(
            "INSERT INTO pgrag.embedding_sets (collection_id, model, dimensions, state)"
            " SELECT id, 'hash/8', %s, 'active' FROM pgrag.collections",
            (DIMS,),
        )
        conn.execute(
            "UPDATE pgrag.collections c SET active_set_id = es.id"
            " FROM pgrag.embedding_sets es WHERE es.collection_id = c.id"
        )
        conn.execute(
            "INSERT INTO pgrag.documents (collection_id, path, name, file_type, status)"
            " SELECT c.id, 'd' || i || '.md', 'd' || i, 'md', 'ready'"
            " FROM pgrag.collections c, generate_series(1, 40) i"
        )
        conn.execute(
            "INSERT INTO pgrag.chunks (document_id, collection_id, ordinal, content,"
            " content_hash, token_count, char_start, char_end, lang)"
            " SELECT d.id, d.collection_id, o, 'contract signing ' || d.path || ' part ' || o"
            "   || CASE WHEN o % 5 = 0 THEN ' vacation' ELSE '' END,"
            " '\\x00', 6, 0, 10, 'en' FROM pgrag.documents d, generate_series(1, 10) o"
        )
        rows = conn.execute("SELECT collection_id, id, document_id FROM pgrag.chunks").fetchall()
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO pgrag.embeddings (collection_id, set_id, chunk_id, embedding, lang,"
                " document_id) SELECT %s, es.id, %s, %s::vector, 'en', %s"
                " FROM pgrag.embedding_sets es WHERE es.collection_id = %s",
                [(cid, chunk, _vec(chunk), doc, cid) for cid, chunk, doc in rows],
            )
        for (set_id,) in conn.execute("SELECT id FROM pgrag.embedding_sets").fetchall():
            conn.execute("SELECT pgrag.ensure_embedding_index(%s)", (set_id,))
        conn.execute("ANALYZE")
    return url


def test_collection_scoped_knn_runs_on_one_shard_with_hnsw(distributed_dsn: str) -> None:
    q = _vec(3)
    scoped = explain(
        distributed_dsn,
        f"SELECT chunk_id FROM pgrag.embeddings WHERE collection_id = 1 AND set_id = 1"
        f" ORDER BY embedding::vector({DIMS}) <=> %s::vector LIMIT 5",
        (q,),
    )
    assert task_count(scoped) == 1, scoped
    assert "Index Scan using embeddings_hnsw_1_" in scoped, scoped
    everywhere = explain(
        distributed_dsn,
        f"SELECT chunk_id FROM pgrag.embeddings WHERE set_id = 1"
        f" ORDER BY embedding::vector({DIMS}) <=> '{q}'::vector LIMIT 5",
        all_tasks=False,
    )
    assert task_count(everywhere) == 32, everywhere  # citus.shard_count: every shard
    assert "Index Scan using embeddings_hnsw_1_" in everywhere


def test_collection_scoped_full_text_runs_on_one_shard_with_gin(distributed_dsn: str) -> None:
    plan = explain(
        distributed_dsn,
        "SELECT id FROM pgrag.chunks WHERE collection_id = 2"
        " AND tsv @@ to_tsquery('pgrag.search', 'vacation')",
    )
    assert task_count(plan) == 1, plan
    fanned = explain(
        distributed_dsn,
        "SELECT id FROM pgrag.chunks WHERE tsv @@ to_tsquery('pgrag.search', 'vacation')",
        all_tasks=False,
    )
    assert "chunks_tsv_idx" in fanned, fanned
    assert task_count(fanned) == 32


def test_knn_over_shards_equals_exact_order(distributed_dsn: str) -> None:
    """Per-shard HNSW + merge on the coordinator returns the exact nearest neighbours."""
    q = _vec(11)
    with psycopg.connect(distributed_dsn) as conn:
        got = conn.execute(
            f"SELECT chunk_id FROM pgrag.embeddings WHERE collection_id = 1 AND set_id = 1"
            f" ORDER BY embedding::vector({DIMS}) <=> %s::vector, chunk_id LIMIT 10",
            (q,),
        ).fetchall()
        exact = conn.execute(
            "SELECT chunk_id FROM (SELECT chunk_id, embedding <=> %s::vector AS d"
            " FROM pgrag.embeddings WHERE collection_id = 1 AND set_id = 1 OFFSET 0) s"
            " ORDER BY d, chunk_id LIMIT 10",
            (q,),
        ).fetchall()
    assert got == exact


def test_a_large_tenant_is_isolated_to_its_own_shards(distributed_dsn: str) -> None:
    """`isolate_tenant_to_new_shard` moves one collection's co-located shards apart (the
    answer to "one collection cannot spread" with the collection key); searches still work."""
    with psycopg.connect(distributed_dsn, autocommit=True) as conn:
        before = conn.execute("SELECT count(*) FROM pgrag.chunks WHERE collection_id = 3")
        n = before.fetchone()
        conn.execute(
            "SELECT isolate_tenant_to_new_shard('pgrag.documents', 3, 'CASCADE',"
            " shard_transfer_mode => 'block_writes')"
        )
        shard = conn.execute(
            "SELECT get_shard_id_for_distribution_column('pgrag.chunks', 3)"
        ).fetchone()
        bounds = conn.execute(
            "SELECT shardminvalue::bigint = shardmaxvalue::bigint FROM pg_dist_shard"
            " WHERE shardid = %s",
            shard,
        ).fetchone()
        after = conn.execute("SELECT count(*) FROM pgrag.chunks WHERE collection_id = 3")
        assert after.fetchone() == n
        emb_shard = conn.execute(
            "SELECT get_shard_id_for_distribution_column('pgrag.embeddings', 3)"
        ).fetchone()
        assert emb_shard
        indexes = conn.execute(
            "SELECT result FROM run_command_on_workers($$SELECT string_agg(\"Name\", ',')"
            ' FROM citus_shard_indexes_on_worker WHERE "Table" = \'embeddings_'
            + str(emb_shard[0])
            + "'$$)"
        ).fetchall()
    assert bounds == (True,)  # a shard holding exactly one hash value: that tenant only
    # the new shard carries the HNSW indexes (the planner may prefer the primary key on a
    # shard that holds only this tenant: every row matches collection_id there)
    assert any(r[0] and f"embeddings_hnsw_3_{emb_shard[0]}" in r[0] for r in indexes), indexes
    plan = explain(
        distributed_dsn,
        f"SELECT chunk_id FROM pgrag.embeddings WHERE collection_id = 3 AND set_id = 3"
        f" ORDER BY embedding::vector({DIMS}) <=> %s::vector LIMIT 5",
        (_vec(5),),
    )
    assert task_count(plan) == 1, plan


# -- a collection-scoped search through the service, statement by statement ---------------

SHARD_RE = re.compile(r"pgrag\.\"?[a-z][a-z0-9_]*_(\d{6,})\b")
# BM25's corpus statistics: the postings pass of the generating terms, the collection's
# chunk count and its document frequencies (pgrag.term_postings, pgrag.bm25_collection_totals,
# pgrag.bm25_term_df)
CORPUS_STATISTICS = ("g(term, i), LATERAL", "bm25_collection_sums_", "bm25_term_sums_")


ROUTING_FOLDERS = three_collections(12)


@pytest.fixture(scope="module")
def ingested_dsn(citus: CitusCluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Three collections ingested through pgrag's own pipeline into a distributed database."""
    return ingested_database(citus, tmp_path_factory.mktemp("routing"), ROUTING_FOLDERS)


def _shard_groups(url: str) -> tuple[dict[int, int], dict[str, int]]:
    """shard id -> its hash range (co-located shards share one), and each collection's."""
    with psycopg.connect(url) as conn:
        groups = dict(
            conn.execute(
                "SELECT shardid, shardminvalue::int FROM pg_dist_shard"
                " WHERE shardminvalue IS NOT NULL"
            ).fetchall()
        )
        of = {
            name: groups[shard]
            for name, shard in conn.execute(
                "SELECT name, get_shard_id_for_distribution_column('pgrag.chunks', id)"
                " FROM pgrag.collections"
            ).fetchall()
        }
    return groups, of


async def _remote_statements(
    url: str, req: SearchRequest
) -> tuple[int, list[tuple[str, set[int]]]]:
    """Run one search through the service; its hit count and, per remote command, the
    hash ranges (shard groups) of the distributed shards it named."""
    found, commands = await logged_search(url, req)
    groups, _ = _shard_groups(url)
    # reference tables (one shard, a copy on every node) name no hash range: left out
    return found, [
        (cmd, {groups[i] for m in SHARD_RE.finditer(cmd) if (i := int(m.group(1))) in groups})
        for cmd, _ in commands
    ]


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
def test_a_collection_scoped_search_runs_on_that_collections_shard(
    ingested_dsn: str, mode: str
) -> None:
    """Every statement of a search scoped to one collection (BM25's statistics of that
    collection, ranking, hit fetch with documents, units and context) goes to that
    collection's shard."""
    _, of = _shard_groups(ingested_dsn)
    assert len(set(of.values())) == 3, of  # the three collections on three shards
    req = SearchRequest(
        query="contract signing legal review vacation", mode=mode, limit=10,
        max_tokens=25000, filters={"collection": "alpha"},
    )  # fmt: skip
    found, statements = asyncio.run(_remote_statements(ingested_dsn, req))
    assert found > 0
    routed = [(cmd, ids) for cmd, ids in statements if ids]
    assert routed, statements
    strays = [(cmd[:150], ids) for cmd, ids in routed if ids != {of["alpha"]}]
    assert not strays, f"shard of alpha: {of['alpha']}; elsewhere: {strays}"
    statistics = [cmd for cmd, _ in routed if any(s in cmd for s in CORPUS_STATISTICS)]
    # the postings pass, the chunk count and the document frequencies, each once, on alpha's
    # shard
    assert len(statistics) == (0 if mode == "semantic" else 3), [c[:120] for c in statistics]


def test_an_unscoped_search_touches_several_shards(ingested_dsn: str) -> None:
    _, of = _shard_groups(ingested_dsn)
    req = SearchRequest(query="contract signing", mode="hybrid", limit=10, max_tokens=25000)
    found, statements = asyncio.run(_remote_statements(ingested_dsn, req))
    touched = {g for _, ids in statements for g in ids}
    assert found > 0
    assert set(of.values()) <= touched and len(touched) > 3, touched


# the read of a hit's whole document (content_mode full): its units in order
WHOLE_TEXT = "body, meta FROM pgrag.units_"


async def _full_hits(url: str, req: SearchRequest) -> list[tuple[str, str | None]]:
    async with open_database(load_settings(), dsn=url, max_size=2) as db:
        page = await SearchService(db.pool, HashEmbedder("hash/384"), log_searches=False).search(
            req
        )
    return [(h.path, h.content) for h in page.data.results]


@pytest.mark.parametrize("mode", ["hybrid", "semantic"])
def test_a_scoped_search_with_full_content_reads_documents_on_that_shard(
    ingested_dsn: str, mode: str
) -> None:
    """content_mode full reads each hit's whole text by document id: on the hit's
    collection's shard, not on all 32 (as every other statement of the search)."""
    _, of = _shard_groups(ingested_dsn)
    req = SearchRequest(
        query="contract signing legal review", mode=mode, limit=10, max_tokens=25000,
        content_mode="full", filters={"collection": "alpha"},
    )  # fmt: skip
    found, statements = asyncio.run(_remote_statements(ingested_dsn, req))
    assert found > 0
    reads = [ids for cmd, ids in statements if WHOLE_TEXT in cmd]
    assert reads, [c[:120] for c, _ in statements]  # the whole text was read remotely
    assert all(ids == {of["alpha"]} for ids in reads), (of["alpha"], reads)
    strays = [(cmd[:150], ids) for cmd, ids in statements if ids and ids != {of["alpha"]}]
    assert not strays, strays
    hits = asyncio.run(_full_hits(ingested_dsn, req))
    whole = dict(hits)["a0.md"]  # the long document, whole: its last paragraph too
    assert whole and "legal review 0 11;" in whole and "Paragraph 0:" in whole, hits
