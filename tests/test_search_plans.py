"""Index exactly the expressions you query: on a table large enough for the planner to
prefer them, the lexical leg of pgrag.hybrid_search reads the GIN index on chunks.tsv and
the semantic leg the embedding set's partial HNSW index; a filter matching ~1% of the
documents still fills the page (iterative index scans)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector, register_vector_async
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from pgrag.db.database import prepare
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.store.collections import ensure_collection
from tests.support.databases import create_database, drop_database
from tests.support.pg15 import PASSWORDS, pgrag_as, with_user

MODEL = "hash/384"
DIMS = 384
DOCS = 2000
CHUNKS_PER_DOC = 10  # 20,000 chunks
EMBEDDED_PER_DOC = 3  # 6,000 embeddings: an HNSW build over 20,000 would dominate the run
FOLDERS = 100  # folder f7 holds 1% of the documents

LOAD_SQL = f"""
INSERT INTO pgrag.documents (id, collection_id, path, folder, name, file_type, status,
                             modified_at)
SELECT md5('doc' || i)::uuid, %(cid)s, format('f%%s/doc%%s.txt', i %% {FOLDERS}, i),
       'f' || (i %% {FOLDERS}), format('doc%%s.txt', i), 'txt', 'ready', now()
FROM generate_series(1, {DOCS}) AS i;

INSERT INTO pgrag.chunks (document_id, collection_id, ordinal, content, content_hash,
                          token_count, char_start, char_end)
SELECT md5('doc' || d)::uuid, %(cid)s, k, t, sha256(convert_to(t, 'UTF8')), 12, 0, length(t)
FROM generate_series(1, {DOCS}) AS d, generate_series(1, {CHUNKS_PER_DOC}) AS k,
     LATERAL (SELECT format('synthetic passage %%s about topic%%s and subject%%s in area%%s',
                            d * 100 + k, (d * {CHUNKS_PER_DOC} + k) %% 500, (d * {CHUNKS_PER_DOC} + k) %% 37,
                            d %% 11) AS t) AS x;

INSERT INTO pgrag.embeddings (set_id, chunk_id, embedding)
SELECT %(sid)s, c.id,
       ARRAY(SELECT random() - 0.5 FROM generate_series(1, {DIMS}) WHERE c.id > 0)::vector
FROM pgrag.chunks c
WHERE c.ordinal <= {EMBEDDED_PER_DOC}
"""


@dataclass(frozen=True)
class Bulk:
    dsn: str
    set_id: int
    collection_id: int
    app_dsn: str | None = None  # PostgreSQL 15: the application role (migrate --app-role)


async def _setup(dsn: str) -> tuple[int, int]:
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        await register_vector_async(conn)
        col = await ensure_collection(conn, "bulk", HashEmbedder(MODEL), DIMS)
    finally:
        await conn.close()
    assert col.set_id is not None
    return col.id, col.set_id


@contextlib.contextmanager
def _database(request: pytest.FixtureRequest) -> Iterator[str]:
    """A migrated database on the suite's server, or on PostgreSQL 15 (migrated by its owner
    role, the way a DBA sets it up: tests/support/pg15.py; read as the superuser, like the
    suite's server, who may LOAD auto_explain)."""
    if request.param == "pg15":
        server = request.getfixturevalue("pg15")
        name = server.create_database()
        asyncio.run(prepare(server.dsn("pgrag_owner", name)))
        granted = pgrag_as(server.dsn("pgrag_owner", name), "migrate", "--app-role", "pgrag_app")
        assert granted.returncode == 0, granted.stderr
        yield server.dsn("postgres", name)
        server.drop_database(name)
        return
    server_dsn = request.getfixturevalue("server_dsn")
    request.getfixturevalue("template_dsn")
    url = create_database(server_dsn)
    yield url
    drop_database(server_dsn, url)


# every plan test runs on the suite's server (PostgreSQL 18) and on the oldest supported one
@pytest.fixture(
    scope="module", params=["suite", pytest.param("pg15", marks=pytest.mark.requires("pg15"))]
)
def bulk(request: pytest.FixtureRequest) -> Iterator[Bulk]:
    with _database(request) as url:
        loaded = _loaded(url)
        if request.param == "pg15":
            app = with_user(url, "pgrag_app", PASSWORDS["pgrag_app"])
            loaded = dataclasses.replace(loaded, app_dsn=app)
        yield loaded


def _loaded(url: str) -> Bulk:
    cid, sid = asyncio.run(_setup(url))
    with psycopg.connect(url, autocommit=True) as conn:
        # bulk-build the HNSW index after loading: inserting into it row by row is slower
        conn.execute(f"DROP INDEX pgrag.embeddings_hnsw_{sid}")
        with conn.transaction():
            for statement in LOAD_SQL.split(";\n"):
                conn.execute(statement, {"cid": cid, "sid": sid})
        conn.execute("SET maintenance_work_mem = '256MB'")
        conn.execute("SELECT pgrag.ensure_embedding_index(%s)", (sid,))
        # VACUUM as autovacuum would after a bulk load: it also empties the GIN pending list
        # (fastupdate), which the planner otherwise costs as a scan of every pending entry
        conn.execute("VACUUM ANALYZE pgrag.documents, pgrag.chunks, pgrag.embeddings")
    return Bulk(url, sid, cid)


def query_vector(text: str) -> np.ndarray:
    return asyncio.run(HashEmbedder(MODEL).embed_query(text))


def plan(conn: psycopg.Connection, sql: str, params: tuple[object, ...] = ()) -> str:
    return "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params).fetchall())


def test_the_corpus_is_large(bulk: Bulk) -> None:
    with psycopg.connect(bulk.dsn) as conn:
        n = conn.execute(
            "SELECT (SELECT count(*) FROM pgrag.chunks), "
            "(SELECT count(DISTINCT embedding::text) FROM pgrag.embeddings)"
        ).fetchone()
    assert n == (DOCS * CHUNKS_PER_DOC, DOCS * EMBEDDED_PER_DOC)  # every vector distinct


def nested_plans(conn: psycopg.Connection, sql: str, params: tuple[object, ...] = ()) -> str:
    """The plans of every statement `sql` runs, nested ones included: the legs are plpgsql,
    auto_explain logs what they execute."""
    notices: list[str] = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    conn.execute("LOAD 'auto_explain'")
    for setting in (
        "auto_explain.log_min_duration = 0",
        "auto_explain.log_nested_statements = on",
        "client_min_messages = log",
    ):
        conn.execute(f"SET {setting}")
    conn.execute(sql, params).fetchall()
    conn.execute("SET client_min_messages = notice")
    return "\n".join(notices)


def test_lexical_leg_of_hybrid_search_uses_the_gin_index(bulk: Bulk) -> None:
    with psycopg.connect(bulk.dsn) as conn:
        text = nested_plans(conn, "SELECT * FROM pgrag.hybrid_search('topic42', NULL, 10)")
        rows = conn.execute(
            "SELECT c.content FROM pgrag.hybrid_search('topic42 subject5', NULL, 100) h"
            " JOIN pgrag.chunks c ON c.id = h.chunk_id"
        ).fetchall()
    assert "Bitmap Index Scan on chunks_tsv_idx" in text, text
    assert "Seq Scan on chunks" not in text, text
    assert len(rows) == 100
    assert all("topic42 " in r[0] or "subject5 " in r[0] for r in rows)


SEARCHES = {
    "hybrid": "SELECT * FROM pgrag.hybrid_search('topic42', %s, 10, filters => %s)",
    "semantic": "SELECT * FROM pgrag.hybrid_search(NULL, %s, 10, filters => %s)",
    "keyword": "SELECT * FROM pgrag.hybrid_search('topic42', NULL, 10, filters => %s)",
    "regex": "SELECT * FROM pgrag.regex_search('topic4[2]', 10, filters => %s)",
}


@pytest.mark.parametrize("mode", sorted(SEARCHES))
@pytest.mark.parametrize("folder", [None, "f7"])
def test_every_mode_and_filter_reads_through_indexes(
    bulk: Bulk, mode: str, folder: str | None
) -> None:
    """No statement of a search scans a whole table of the corpus, with or without a folder
    filter, on PostgreSQL 15 as on 18 (15 has no B-tree skip scan: a folder condition reaches
    documents_folder_idx only beside a collection condition)."""
    filters = Jsonb({"folder": folder} if folder else {})
    params: tuple[object, ...] = (filters,)
    if "%s, 10" in SEARCHES[mode]:
        params = (query_vector("topic42"), filters)
    with psycopg.connect(bulk.dsn) as conn:
        register_vector(conn)
        text = nested_plans(conn, SEARCHES[mode], params)
    # regex mode finds chunks by their trigram index, then joins the few documents they
    # belong to however is cheapest (at this size, one pass over documents)
    tables = ("chunks", "embeddings") if mode == "regex" else ("documents", "chunks", "embeddings")
    for table in tables:
        assert f"Seq Scan on {table}" not in text, text


def test_semantic_leg_uses_the_hnsw_index(bulk: Bulk) -> None:
    # the leg's SQL text exactly as pgrag.semantic_candidates executes it
    with psycopg.connect(bulk.dsn, autocommit=True, cursor_factory=psycopg.ClientCursor) as conn:
        register_vector(conn)
        legs = {}
        for name, filtered_, by_language in (
            ("plain", False, False),
            ("filtered", True, False),
            ("by_language", False, True),
        ):
            leg = conn.execute(
                "SELECT pgrag.semantic_leg_sql(%s, %s, %s, %s, %s)",
                (bulk.set_id, DIMS, filtered_, by_language, bulk.collection_id),
            ).fetchone()[0]
            conn.execute(f"PREPARE {name}(vector, jsonb, int, text[]) AS {leg}")
            legs[name] = name
        vec = query_vector("topic42")
        args = "(%s, %s, 100, ARRAY['und'])"
        plain = plan(conn, "EXECUTE plain" + args, (vec, Jsonb({})))
        filtered = plan(conn, "EXECUTE filtered" + args, (vec, Jsonb({"folder": "f7"})))
        by_language = plan(conn, "EXECUTE by_language" + args, (vec, Jsonb({})))
    index = f"embeddings_hnsw_{bulk.set_id}"
    assert f"Index Scan using {index} on embeddings" in plain, plain
    # a selective filter may instead pre-filter through the folder index and rank exactly
    assert (
        f"Index Scan using {index} on embeddings" in filtered or "documents_folder_idx" in filtered
    ), filtered
    assert f"Index Scan using {index} on embeddings" in by_language, by_language
    assert "Seq Scan on embeddings" not in plain + filtered + by_language


def test_the_app_roles_semantic_leg_reads_through_indexes(bulk: Bulk) -> None:
    """The application role (PostgreSQL 15: `migrate --app-role`, row-level security applies
    to it) ranks a plain semantic leg through the HNSW index and never scans embeddings or
    chunks whole; a folder filter may cost it one pass over documents (the folder index's
    conditions are not leakproof, so RLS keeps them out of index scans; docs/existing-
    postgresql.md)."""
    with psycopg.connect(
        bulk.app_dsn or bulk.dsn, autocommit=True, cursor_factory=psycopg.ClientCursor
    ) as conn:
        register_vector(conn)
        vec = query_vector("topic42")
        plans = []
        for name, filtered_, filters in (
            ("plain", False, {}),
            ("filtered", True, {"folder": "f7"}),
        ):
            leg = conn.execute(
                "SELECT pgrag.semantic_leg_sql(%s, %s, %s, false, %s)",
                (bulk.set_id, DIMS, filtered_, bulk.collection_id),
            ).fetchone()[0]
            conn.execute(f"PREPARE {name}(vector, jsonb, int, text[]) AS {leg}")
            plans.append(
                plan(conn, f"EXECUTE {name}(%s, %s, 100, ARRAY['und'])", (vec, Jsonb(filters)))
            )
    assert f"Index Scan using embeddings_hnsw_{bulk.set_id} on embeddings" in plans[0], plans[0]
    for text in plans:
        assert "Seq Scan on embeddings" not in text and "Seq Scan on chunks" not in text, text


@pytest.fixture
async def pool(bulk: Bulk) -> AsyncIterator[AsyncConnectionPool]:
    p = AsyncConnectionPool(
        bulk.dsn,
        min_size=1,
        max_size=2,
        open=False,
        configure=register_vector_async,
        kwargs={"autocommit": True},
    )
    await p.open(wait=True, timeout=30)
    yield p
    await p.close()


def embedded_in_f7(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT count(*) FROM pgrag.embeddings e JOIN pgrag.chunks c ON c.id = e.chunk_id"
            " JOIN pgrag.documents d ON d.id = c.document_id WHERE d.folder = 'f7'"
        ).fetchone()[0]


def test_filtered_vector_search_still_fills_the_pool(bulk: Bulk) -> None:
    available = embedded_in_f7(bulk.dsn)
    assert available == DOCS // FOLDERS * EMBEDDED_PER_DOC == 60
    vec = query_vector("subject5 area3")
    with psycopg.connect(bulk.dsn) as conn:
        register_vector(conn)
        rows = conn.execute(
            "SELECT h.chunk_id, d.folder, h.semantic_rank, h.total_candidates"
            " FROM pgrag.hybrid_search(NULL, %s, 10, filters => %s,"
            " opts => pgrag.ranking_options(pool_size => 50)) h"
            " JOIN pgrag.documents d ON d.id = h.document_id ORDER BY h.rank",
            (vec, Jsonb({"folder": "f7"})),
        ).fetchall()
    assert len(rows) == 10
    assert {r[1] for r in rows} == {"f7"}
    assert [r[2] for r in rows] == list(range(1, 11))
    # a plain HNSW scan (ef_search 50) would meet ~1 f7 row among its 50 candidates
    assert rows[0][3] == 50


def test_each_set_gets_a_graph_denser_than_pgvectors_default(bulk: Bulk) -> None:
    """ef_construction 128, not pgvector's 64, whose graph falls short of recall@10 0.95 at a
    million vectors (benchmarks/scale/hnsw_graph.py)."""
    with psycopg.connect(bulk.dsn) as conn:
        options = conn.execute(
            "SELECT reloptions FROM pg_class WHERE oid = %s::regclass",
            (f"pgrag.embeddings_hnsw_{bulk.set_id}",),
        ).fetchone()[0]
    assert sorted(options) == ["ef_construction=128", "m=16"]


def test_the_hnsw_candidate_list_grows_with_the_set(bulk: Bulk) -> None:
    """hnsw.ef_search follows the set's size (its recall at a fixed value falls as the set
    grows), never below the pool asked for nor above pgvector's 1,000."""
    vec = query_vector("subject5 area3")
    with psycopg.connect(bulk.dsn) as conn:
        register_vector(conn)
        rule = conn.execute(
            "SELECT pgrag.hnsw_ef_search(10, 6000), pgrag.hnsw_ef_search(10, 1000),"
            " pgrag.hnsw_ef_search(300, 6000), pgrag.hnsw_ef_search(100, 1e6),"
            " pgrag.hnsw_ef_search(100, 1e8)"
        ).fetchone()
        assert rule == (49, 40, 300, 633, 1000)
        for pool_size, expected in ((10, 49), (300, 300)):
            with conn.transaction():  # the leg sets it for the rest of the transaction
                conn.execute(
                    "SELECT count(*) FROM pgrag.hybrid_search("
                    "NULL, %s, 10, opts => pgrag.ranking_options(pool_size => %s))",
                    (vec, pool_size),
                )
                ef = conn.execute("SELECT current_setting('hnsw.ef_search')").fetchone()[0]
            assert int(ef) == expected


@pytest.mark.anyio
async def test_filtered_semantic_search_returns_limit_results(
    pool: AsyncConnectionPool, bulk: Bulk
) -> None:
    service = SearchService(pool, HashEmbedder(MODEL), log_searches=False)
    page = await service.search(
        SearchRequest(
            query="subject5 area3",
            mode="semantic",
            limit=10,
            filters={"folder": "f7"},
            content_mode="none",
            max_tokens=25000,
        )
    )
    assert len(page.data.results) == 10
    assert {h.path.split("/")[0] for h in page.data.results} == {"f7"}
    assert page.data.total_matches == embedded_in_f7(bulk.dsn)  # every f7 vector was reached
    assert page.has_more
    hybrid = await service.search(
        SearchRequest(
            query="topic75",  # in one chunk of every f7 document (and of f57's)
            limit=10,
            filters={"folder": "f7"},
            content_mode="none",
            max_tokens=25000,
            explain=True,
        )
    )
    assert len(hybrid.data.results) == 10
    assert {h.path.split("/")[0] for h in hybrid.data.results} == {"f7"}
    lexical = [h for h in hybrid.data.results if h.explain and h.explain.lexical_rank]
    assert lexical and all("topic75 " in h.preview for h in lexical)
