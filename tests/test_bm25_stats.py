"""BM25's statistics per collection (migration 0023): chunk count, total length and each
lexeme's document frequency, kept exact by the writers in the chunks' own transaction.

- the stored sums equal the statistics counted from the chunks after inserts, new
  versions, deletes (missing files, the write API), an in-place update, reindex and
  compaction, with the triggers (single server) and with the writer's explicit calls (what
  Citus runs, checked here with the triggers dropped);
- a scoped key and a collection filter score exactly as BM25 with statistics counted in
  the collection, and read the sums to do it (wrong sums change the scores);
- two ingests into one collection never wait on each other's sums.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgrag.db.database import open_database
from pgrag.db.scope import scoped_connection
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.ingest.reindex import reindex
from pgrag.services import documents as docs
from pgrag.settings import load_settings
from tests.support.bm25_sums import assert_exact, row_counts

pytestmark = pytest.mark.anyio

ALPHA = {
    "zebra.md": "# Stripes\n\nThe zebra crossing near the depot is repainted every spring.\n",
    "lorry.md": "# Depot\n\nLorries leave the depot at dawn with the spring deliveries.\n",
    "invoice.md": "# Billing\n\nInvoices for the depot are paid within thirty days.\n",
    "long.md": "# Depot handbook\n\n"
    + "\n\n".join(
        f"Section {i}: the depot opens at {i} and zebra stripes fade." for i in range(40)
    ),
}
BETA = {f"herd{i}.md": f"# Herd {i}\n\nZebra herd {i} grazes near the depot.\n" for i in range(6)}
QUERY = "zebra depot spring deliveries"
TRIGGERS = ("chunks_bm25_added", "chunks_bm25_removed", "chunks_bm25_updated")

# BM25 from statistics counted in one collection (the formula of sql/functions/20_lexical.sql:
# idf over the collection's chunks, tf from ts_rank, length against the mean over the
# matching chunks): what the lexical leg returned before the sums, with every df counted
COUNTED_SCORES_SQL = """
WITH scope AS MATERIALIZED (
    SELECT c.id, c.tsv FROM pgrag.chunks c WHERE c.collection_id = %(cid)s
),
terms AS (
    SELECT t.term, pgrag.bm25_idf((SELECT count(*) FROM scope),
                                  (SELECT count(*) FROM scope s WHERE s.tsv @@ t.term)) AS idf
    FROM pgrag.query_terms(pgrag.lexical_query(%(q)s)) t
),
matching AS (SELECT s.* FROM scope s WHERE s.tsv @@ pgrag.lexical_query(%(q)s))
SELECT m.id, sum(pgrag.bm25_score(pgrag.term_frequency(ts_rank('{1,1,1,1}', m.tsv, t.term)),
                                  t.idf, length(m.tsv), (SELECT avg(length(x.tsv)) FROM matching x),
                                  d.bm25_k1, d.bm25_b)) FILTER (WHERE m.tsv @@ t.term)
FROM matching m CROSS JOIN terms t CROSS JOIN pgrag.fusion_defaults() d GROUP BY m.id
"""
SEARCH_SQL = "SELECT chunk_id, score FROM pgrag.lexical_candidates(%s, %s::bigint[])"


def _write(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")


async def _ingest(dsn: str, folder: Path, collection: str, model: str = "hash/64") -> None:
    async with open_database(load_settings(), dsn=dsn) as db:
        summary = await Ingestor(db.pool, HashEmbedder(model), collection=collection).run([folder])
    assert not summary.failures, summary.failures


def _collection_id(dsn: str, name: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT id FROM pgrag.collections WHERE name = %s", (name,)).fetchone()
    assert row is not None
    return int(row[0])


async def _every_write(dsn: str, tmp: Path) -> None:
    """Ingest two collections, then a new version, a new file, a removed file, a delete
    through the write API and a reindex, checking the sums after each."""
    _write(tmp / "alpha", ALPHA)
    _write(tmp / "beta", BETA)
    await _ingest(dsn, tmp / "alpha", "alpha")
    await _ingest(dsn, tmp / "beta", "beta")
    assert_exact(dsn)
    (tmp / "alpha" / "zebra.md").write_text("# Stripes\n\nThe crossing was moved.\n")
    (tmp / "alpha" / "new.md").write_text("# New\n\nA new depot for spring lorries.\n")
    (tmp / "alpha" / "invoice.md").unlink()
    await _ingest(dsn, tmp / "alpha", "alpha")
    assert_exact(dsn)
    async with open_database(load_settings(), dsn=dsn) as db:
        await docs.delete_document(db.pool, None, "herd3.md")
    assert_exact(dsn)
    async with open_database(load_settings(), dsn=dsn) as db:
        await reindex(db.pool, "alpha", HashEmbedder("hash/32"), batch=2, drop_old=True)
    assert_exact(dsn)


async def test_sums_follow_every_write_with_the_triggers(dsn: str, tmp_path: Path) -> None:
    await _every_write(dsn, tmp_path)
    with psycopg.connect(dsn, autocommit=True) as conn:
        # a content rewritten in place counts; a language change alone appends nothing
        conn.execute(
            "UPDATE pgrag.chunks SET content = content || ' zebra quagga'"
            " WHERE id = (SELECT min(id) FROM pgrag.chunks)"
        )
        before = row_counts(dsn)
        conn.execute("UPDATE pgrag.chunks SET lang = 'de'")
        assert row_counts(dsn) == before
    exact = assert_exact(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        folded = conn.execute("SELECT pgrag.compact_bm25_sums()").fetchone()
        assert folded is not None and folded[0] > 0
    assert assert_exact(dsn) == exact
    # one row per collection and per (collection, lexeme) left
    collections, lexemes = len(exact["counted"][0]), len(exact["counted"][1])
    assert row_counts(dsn) == (collections, lexemes)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM pgrag.collections WHERE name = 'beta'")
        conn.execute("SELECT pgrag.compact_bm25_sums()")
    assert_exact(dsn)
    assert row_counts(dsn)[0] == 1


async def test_the_writer_keeps_the_sums_without_triggers(dsn: str, tmp_path: Path) -> None:
    """Citus runs no triggers on distributed tables: there the writer calls
    pgrag.write_bm25_sums around each version and delete (a no-op while the triggers exist)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in TRIGGERS:
            conn.execute(f"DROP TRIGGER {name} ON pgrag.chunks")
    await _every_write(dsn, tmp_path)


async def test_scoped_scores_equal_bm25_with_counted_statistics(dsn: str, tmp_path: Path) -> None:
    _write(tmp_path / "alpha", ALPHA)
    _write(tmp_path / "beta", BETA)
    await _ingest(dsn, tmp_path / "alpha", "alpha")
    await _ingest(dsn, tmp_path / "beta", "beta")
    (tmp_path / "alpha" / "lorry.md").write_text("# Depot\n\nZebra lorries leave at dawn.\n")
    await _ingest(dsn, tmp_path / "alpha", "alpha")
    alpha = _collection_id(dsn, "alpha")
    with psycopg.connect(dsn) as conn:
        counted = dict(conn.execute(COUNTED_SCORES_SQL, {"cid": alpha, "q": QUERY}).fetchall())
        filtered = dict(conn.execute(SEARCH_SQL, (QUERY, [alpha])).fetchall())
    assert len(counted) > 5
    _assert_same(filtered, counted)
    _assert_same(await _scoped(dsn, ["alpha"]), counted)

    # the search reads the sums: a wrong document frequency changes its scores
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pgrag.bm25_term_sums (collection_id, lexeme, df) VALUES (%s, 'zebra', 3)",
            (alpha,),
        )
        wrong = dict(conn.execute(SEARCH_SQL, (QUERY, [alpha])).fetchall())
        assert wrong.keys() == counted.keys()
        assert any(abs(wrong[k] - counted[k]) > 1e-6 for k in counted)
        conn.execute("SELECT pgrag.recount_bm25_sums(%s)", (alpha,))
        _assert_same(dict(conn.execute(SEARCH_SQL, (QUERY, [alpha])).fetchall()), counted)


async def _scoped(dsn: str, scope: list[str]) -> dict[int, float]:
    """The lexical pool through a key limited to `scope` (row-level security)."""
    async with (
        open_database(load_settings(), dsn=dsn) as db,
        scoped_connection(db.pool, scope) as conn,
    ):
        rows = await (await conn.execute(SEARCH_SQL, (QUERY, None))).fetchall()
    return {int(r[0]): float(r[1]) for r in rows}


def _assert_same(got: dict[Any, float], want: dict[Any, float]) -> None:
    assert got.keys() == want.keys()
    diffs = {k: (got[k], want[k]) for k in want if abs(got[k] - want[k]) > 1e-9}
    assert not diffs, diffs


CHUNK_SQL = """
INSERT INTO pgrag.chunks (document_id, collection_id, ordinal, content, content_hash,
                          token_count, char_start, char_end)
VALUES (%s, %s, 1, 'zebra depot spring', '\\x00', 3, 0, 18)
"""


async def test_two_writers_into_one_collection_do_not_wait(dsn: str, tmp_path: Path) -> None:
    """Each statement appends its own rows: a second writer adding the same lexemes to the
    same collection, while the first has not committed, neither waits nor deadlocks (a
    wait would hit lock_timeout and fail the insert)."""
    _write(tmp_path / "alpha", {"two.md": "# Two\n\nOne document.\n", "one.md": "# One\n\nx.\n"})
    await _ingest(dsn, tmp_path / "alpha", "alpha")
    alpha = _collection_id(dsn, "alpha")
    with psycopg.connect(dsn) as first, psycopg.connect(dsn) as second:
        ids = [r[0] for r in first.execute("SELECT id FROM pgrag.documents ORDER BY path")]
        first.execute("SELECT pgrag.compact_bm25_sums()")
        first.commit()
        second.execute("SET lock_timeout = '5s'")
        first.execute("DELETE FROM pgrag.chunks WHERE document_id = %s", (ids[0],))
        first.execute(CHUNK_SQL, (ids[0], alpha))
        second.execute("DELETE FROM pgrag.chunks WHERE document_id = %s", (ids[1],))
        second.execute(CHUNK_SQL, (ids[1], alpha))
        second.commit()
        first.commit()
    assert_exact(dsn)
