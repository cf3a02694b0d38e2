"""The candidate budget bounds the lexical leg's work, never its hits: a query with one rare
term and a common one past the budget still fills its pool, and a key limited to a
collection finds the same chunks as the unscoped search filtered to that collection,
whether or not ANALYZE ran (every caller ranks terms by the sums' exact df) and whichever
terms generate candidates (per query on scale.py's corpus: benchmarks/scale/scoped_hits.py)."""

from __future__ import annotations

import hashlib
import uuid

import psycopg
import pytest

QUERY = "zircon harbour"
BUDGET = 10  # the common term's postings (60) are past it, the rare term's (2) within
# keyword mode, as benchmarks/scale/scale.py searches
SEARCH_SQL = """
SELECT chunk_id FROM pgrag.hybrid_search(
    %(query)s, NULL, 10, %(collections)s, '{}',
    opts => pgrag.ranking_options(semantic_weight => 0, candidate_budget => %(budget)s))
"""
DOCUMENT_SQL = (
    "INSERT INTO pgrag.documents (id, collection_id, path, name, file_type, status, progress)"
    " VALUES (%s, %s, %s, %s, 'txt', 'ready', 100)"
)
CHUNK_SQL = (
    "INSERT INTO pgrag.chunks (document_id, collection_id, ordinal, content, content_hash,"
    " token_count, char_start, char_end) VALUES (%s, %s, 1, %s, %s, %s, 0, %s)"
)


def _texts() -> dict[str, list[str]]:
    """`port`: two chunks with the rare term, 40 with the common one (of varied length, so
    BM25 orders them), 10 with neither; `other`: 20 more with the common term."""
    port = ["A zircon crystal from the harbour quarry.", "Zircon dating of granite."]
    port += [f"The harbour crane {i} lifts {' heavy' * (i % 7)} containers." for i in range(40)]
    port += [f"Invoice {i} is paid within thirty days." for i in range(10)]
    other = [f"Harbour pilot {i} boards the ship at dawn." for i in range(20)]
    return {"port": port, "other": other}


def _load(dsn: str) -> int:
    """The corpus, one document per chunk, without ANALYZE; the id of `port`."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE pgrag.chunks SET (autovacuum_enabled = off)")
        ids = {}
        for name, texts in _texts().items():
            row = conn.execute(
                "INSERT INTO pgrag.collections (name) VALUES (%s) RETURNING id", (name,)
            ).fetchone()
            assert row is not None
            ids[name] = row[0]
            for i, text in enumerate(texts):
                doc = uuid.uuid4()
                conn.execute(DOCUMENT_SQL, (doc, ids[name], f"{name}{i}.txt", f"{name}{i}.txt"))
                digest = hashlib.sha256(text.encode()).digest()
                conn.execute(
                    CHUNK_SQL, (doc, ids[name], text, digest, len(text.split()), len(text))
                )
    return int(ids["port"])


def _search(dsn: str, collections: list[int] | None, budget: float, scope: str = "") -> list[int]:
    """The hits' chunk ids; with `scope`, as a key limited to it (pgrag.enter_scope first in
    the search's transaction, as a scoped request does)."""
    with psycopg.connect(dsn) as conn:
        if scope:
            conn.execute("SELECT pgrag.enter_scope(%s)", (scope,))
        params = {"query": QUERY, "collections": collections, "budget": budget}
        return [r[0] for r in conn.execute(SEARCH_SQL, params).fetchall()]


@pytest.fixture
def port(dsn: str) -> int:
    return _load(dsn)


def test_a_scoped_key_finds_the_chunks_of_the_collection_filter(dsn: str, port: int) -> None:
    """Every caller spends the budget by exact df: the common term does not pass it."""
    everything = _search(dsn, [port], 1e9)  # every term generates: every match scored
    filtered = _search(dsn, [port], BUDGET)
    scoped = _search(dsn, [port], BUDGET, scope="port")
    scoped_unnamed = _search(dsn, None, BUDGET, scope="port")
    assert len(everything) == 10
    assert filtered == everything
    assert scoped == everything, (scoped, everything)
    assert scoped_unnamed == everything


def test_an_unscoped_search_past_the_budget_fills_its_pool(dsn: str, port: int) -> None:
    """After ANALYZE (N the planner's estimate) the common term is past the budget for the
    unrestricted caller too: the next rarest term generates all the same."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE pgrag.chunks")
        tracked = conn.execute(
            "SELECT 'harbour' = ANY (most_common_elems::text::text[]) FROM pg_stats"
            " WHERE schemaname = 'pgrag' AND tablename = 'chunks' AND attname = 'tsv'"
        ).fetchone()
    assert tracked == (True,)  # ANALYZE ran and sees the common term
    everything = _search(dsn, None, 1e9)
    assert len(everything) == 10
    assert _search(dsn, None, BUDGET) == everything
    assert _search(dsn, [port], BUDGET) == _search(dsn, [port], 1e9)
    assert _search(dsn, [port], BUDGET, scope="port") == _search(dsn, [port], 1e9)
