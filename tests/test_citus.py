"""pgrag on a real local Citus cluster (a coordinator and two workers, built from the
vendored source by tests/support/citus.py): what works today, and proof of what blocks the
distributed mode (issue 16, docs/scale-out.md).

- On a Citus coordinator with PGRAG_DISTRIBUTED unset, migrate keeps the tables local
  and every search mode returns what a single server returns for the same folder.
- PGRAG_DISTRIBUTED=true refuses with the exact list of blockers, read from the catalogue.
- With the schema changes of tests/support/citus_schema_*.sql (not migrations: they change
  single-server mode), `distribute()` co-locates the large tables by collection, a
  collection-scoped kNN and full-text query is routed to one shard using the shard's HNSW
  and GIN indexes, and an unscoped one fans out; pgrag's LANGUAGE sql search functions are
  refused by Citus there, which is the blocker the ranking functions have to lift.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgrag.db import distributed, migrations
from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.errors import DatabaseError
from pgrag.ingest.pipeline import Ingestor
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.settings import load_settings
from tests.support.citus import CitusCluster, apply_schema_changes, citus_cluster

_names = itertools.count()

FOLDERS: dict[str, dict[str, str]] = {
    "legal": {
        "contracts/signing.md": "# Contract signing\n\nEvery supplier contract is signed by two "
        "authorised managers after the legal review. Signed contracts go to the archive.\n",
        "contracts/合同.txt": "合同管理制度\n\n合同由业务部门起草，经法务部门审核后签署。\n",
        "notes/contacts.md": "# Contacts\n\nQuestions about contracts: legal@example.com, "
        "invoices: billing@example.com.\n",
    },
    "hr": {
        "leave.md": "# Leave policy\n\nEmployees receive twenty days of paid vacation leave. "
        "Vacation requests are made two weeks in advance.\n",
        "expenses.md": "# Travel expenses\n\nSubmit expense claims with the original invoices "
        "within 30 days; finance reviews each claim.\n",
    },
}
SEARCHES: list[dict[str, Any]] = [
    {"query": "contract signing review", "mode": "hybrid"},
    {"query": "vacation leave", "mode": "hybrid", "filters": {"collection": "hr"}},
    {"query": "who signs supplier contracts", "mode": "semantic"},
    {"query": "invoices claim", "mode": "keyword"},
    {"query": "合同签署", "mode": "keyword"},
    {"query": r"[a-z]+@example\.com", "mode": "regex"},
    {"query": "contract", "mode": "hybrid", "scope": "documents"},
]


@pytest.fixture(scope="session")
def citus() -> Iterator[CitusCluster]:
    """Build Citus once per machine (cached), start a coordinator + 2 workers for the run.
    Never skipped: a machine that cannot build it fails here with the reason."""
    with citus_cluster(workers=2) as cluster:
        yield cluster


def _fresh(citus: CitusCluster) -> str:
    return citus.create_database(f"pgrag_citus_{next(_names)}")


async def _ingest(dsn: str, tmp: Path) -> None:
    provider = HashEmbedder("hash/384")
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        for collection, files in FOLDERS.items():
            root = tmp / collection
            for rel, text in files.items():
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(text, encoding="utf-8")
            summary = await Ingestor(db.pool, provider, collection=collection).run([root])
            assert not summary.failures, summary.failures


async def _results(dsn: str) -> list[list[tuple[str, float]]]:
    provider = HashEmbedder("hash/384")
    out = []
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        service = SearchService(db.pool, provider)
        for kw in SEARCHES:
            page = await service.search(SearchRequest(max_tokens=25000, limit=10, **kw))
            out.append([(h.path, round(h.score, 6)) for h in page.data.results])
    return out


def test_cluster_runs_a_coordinator_and_two_workers(citus: CitusCluster) -> None:
    with psycopg.connect(citus.dsn()) as conn:
        rows = conn.execute(
            "SELECT nodeport FROM pg_dist_node WHERE noderole = 'primary' AND groupid > 0"
        ).fetchall()
        version = conn.execute("SELECT citus_version()").fetchone()
    assert version and "Citus 14.0.1" in version[0], version
    assert sorted(r[0] for r in rows) == sorted(citus.worker_ports)


def test_on_a_coordinator_every_search_mode_matches_a_single_server(
    citus: CitusCluster, dsn: str, tmp_path: Path
) -> None:
    """Unset PGRAG_DISTRIBUTED + citus: tables stay local, pgrag works unchanged."""
    coordinator = _fresh(citus)
    asyncio.run(_ingest(coordinator, tmp_path / "c"))
    asyncio.run(_ingest(dsn, tmp_path / "s"))
    with psycopg.connect(coordinator) as conn:
        assert conn.execute("SELECT count(*) FROM pg_dist_partition").fetchone() == (0,)
    on_citus, single = asyncio.run(_results(coordinator)), asyncio.run(_results(dsn))
    assert all(on_citus), f"a search found nothing: {on_citus}"
    assert on_citus == single


async def _migrate(dsn: str, mode: bool | None) -> None:
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        await migrations.migrate(conn, distributed=mode)
    finally:
        await conn.close()


def test_distributed_true_names_every_blocker(citus: CitusCluster) -> None:
    url = _fresh(citus)
    with pytest.raises(DatabaseError) as exc:
        asyncio.run(_migrate(url, True))
    msg = str(exc.value)
    for expected in (
        "pgrag.units has no collection_id column",
        "pgrag.embeddings has no collection_id column",
        "primary key documents_pkey PRIMARY KEY (id) lacks collection_id",
        "pgrag.documents: trigger documents_changed",
        "pgrag.units: row-security policy scoped has a subquery",
        "collections_active_set_fk",
        "parameterised LANGUAGE sql function",
    ):
        assert expected in msg, msg
    with psycopg.connect(url) as conn:  # nothing half-done
        assert conn.execute("SELECT count(*) FROM pg_dist_partition").fetchone() == (0,)


def test_distributed_true_without_citus_is_refused(empty_dsn: str) -> None:
    with pytest.raises(DatabaseError, match="citus extension is not installed"):
        asyncio.run(_migrate(empty_dsn, True))


DIMS = 8


def _vec(i: int) -> str:
    return "[" + ",".join(str(((i * 7 + k * 13) % 17) / 17 - 0.4) for k in range(DIMS)) + "]"


@pytest.fixture(scope="module")
def distributed_dsn(citus: CitusCluster) -> str:
    """A database distributed by collection after the schema changes pgrag still needs."""
    url = _fresh(citus)
    asyncio.run(_migrate(url, None))
    with psycopg.connect(url, autocommit=True) as conn:
        apply_schema_changes(conn, "before")
    conn_async = asyncio.run(_blockers_then_distribute(url))
    assert all("LANGUAGE sql function" in b for b in conn_async), conn_async
    with psycopg.connect(url, autocommit=True) as conn:
        apply_schema_changes(conn, "after")
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
        rows = conn.execute("SELECT collection_id, id FROM pgrag.chunks").fetchall()
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO pgrag.embeddings (collection_id, set_id, chunk_id, embedding, lang)"
                " SELECT %s, es.id, %s, %s::vector, 'en' FROM pgrag.embedding_sets es"
                " WHERE es.collection_id = %s",
                [(cid, chunk, _vec(chunk), cid) for cid, chunk in rows],
            )
        for (set_id,) in conn.execute("SELECT id FROM pgrag.embedding_sets").fetchall():
            conn.execute("SELECT pgrag.ensure_embedding_index(%s)", (set_id,))
        conn.execute("ANALYZE")
    return url


async def _blockers_then_distribute(url: str) -> list[str]:
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    try:
        found = await distributed.blockers(conn)
        await distributed.distribute(conn)
        await distributed.distribute(conn)  # idempotent
        return found
    finally:
        await conn.close()


def _plan(url: str, sql: str, params: tuple[Any, ...] = (), all_tasks: bool = True) -> str:
    """EXPLAIN (every task shown for a routed query, one of them for a fan-out); index use
    forced by SET LOCAL, which Citus passes to the workers (a plain session SET, like
    hnsw.ef_search, does not reach them)."""
    with psycopg.connect(url) as conn:
        conn.execute("SET citus.propagate_set_commands = 'local'")
        conn.execute("SELECT set_config('citus.explain_all_tasks', %s, true)", (str(all_tasks),))
        conn.execute("SET LOCAL enable_seqscan = off")
        rows = conn.execute(f"EXPLAIN (COSTS OFF) {sql}", params).fetchall()
    return "\n".join(r[0] for r in rows)


def _task_count(plan: str) -> int:
    m = re.search(r"Task Count: (\d+)", plan)
    assert m, plan
    return int(m.group(1))


def test_tables_are_colocated_by_collection(distributed_dsn: str) -> None:
    with psycopg.connect(distributed_dsn) as conn:
        rows = dict(
            conn.execute(
                "SELECT logicalrelid::regclass::text, partmethod::text || ':' || colocationid"
                " FROM pg_dist_partition"
            ).fetchall()
        )
        asyncio.run(_migrate(distributed_dsn, None))  # a re-run sees it distributed
    kinds = {t: v.split(":")[0] for t, v in rows.items()}
    assert kinds["pgrag.collections"] == kinds["pgrag.embedding_sets"] == "n"
    big = [f"pgrag.{t}" for t in distributed.DISTRIBUTED_TABLES]
    assert {kinds[t] for t in big} == {"h"}
    assert len({rows[t] for t in big}) == 1, rows


def test_collection_scoped_knn_runs_on_one_shard_with_hnsw(distributed_dsn: str) -> None:
    q = _vec(3)
    scoped = _plan(
        distributed_dsn,
        f"SELECT chunk_id FROM pgrag.embeddings WHERE collection_id = 1 AND set_id = 1"
        f" ORDER BY embedding::vector({DIMS}) <=> %s::vector LIMIT 5",
        (q,),
    )
    assert _task_count(scoped) == 1, scoped
    assert "Index Scan using embeddings_hnsw_1_" in scoped, scoped
    everywhere = _plan(
        distributed_dsn,
        f"SELECT chunk_id FROM pgrag.embeddings WHERE set_id = 1"
        f" ORDER BY embedding::vector({DIMS}) <=> '{q}'::vector LIMIT 5",
        all_tasks=False,
    )
    assert _task_count(everywhere) == 32, everywhere  # citus.shard_count: every shard
    assert "Index Scan using embeddings_hnsw_1_" in everywhere


def test_collection_scoped_full_text_runs_on_one_shard_with_gin(distributed_dsn: str) -> None:
    plan = _plan(
        distributed_dsn,
        "SELECT id FROM pgrag.chunks WHERE collection_id = 2"
        " AND tsv @@ to_tsquery('pgrag.search', 'vacation')",
    )
    assert _task_count(plan) == 1, plan
    fanned = _plan(
        distributed_dsn,
        "SELECT id FROM pgrag.chunks WHERE tsv @@ to_tsquery('pgrag.search', 'vacation')",
        all_tasks=False,
    )
    assert "chunks_tsv_idx" in fanned, fanned
    assert _task_count(fanned) == 32


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


def test_pgrag_sql_search_functions_are_refused_on_distributed_tables(
    distributed_dsn: str,
) -> None:
    """The blocker for search: Citus cannot plan parameterised LANGUAGE sql functions
    over distributed tables; the ranking functions must change (docs/scale-out.md)."""
    with (
        psycopg.connect(distributed_dsn) as conn,
        pytest.raises(psycopg.errors.FeatureNotSupported, match="SQL functions"),
    ):
        conn.execute(
            "SELECT * FROM pgrag.regex_search('vacation', 5, ARRAY[1]::bigint[])"
        ).fetchall()


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
    plan = _plan(
        distributed_dsn,
        f"SELECT chunk_id FROM pgrag.embeddings WHERE collection_id = 3 AND set_id = 3"
        f" ORDER BY embedding::vector({DIMS}) <=> %s::vector LIMIT 5",
        (_vec(5),),
    )
    assert _task_count(plan) == 1, plan
