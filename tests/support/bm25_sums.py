"""BM25's per-collection sums (migration 0023) against the statistics counted from the
chunks: what tests/test_bm25_stats*.py compare after every kind of write."""

from __future__ import annotations

from typing import Any

import psycopg

STORED_TOTALS_SQL = """
SELECT c.name, sum(s.chunks)::int, sum(s.total_length)::int
FROM pgrag.bm25_collection_sums s JOIN pgrag.collections c ON c.id = s.collection_id
GROUP BY 1 HAVING sum(s.chunks) <> 0 OR sum(s.total_length) <> 0 ORDER BY 1
"""
COUNTED_TOTALS_SQL = """
SELECT c.name, count(*)::int, sum(length(ch.tsv))::int
FROM pgrag.chunks ch JOIN pgrag.collections c ON c.id = ch.collection_id
GROUP BY 1 ORDER BY 1
"""
STORED_DF_SQL = """
SELECT c.name, t.lexeme, sum(t.df)::int
FROM pgrag.bm25_term_sums t JOIN pgrag.collections c ON c.id = t.collection_id
GROUP BY 1, 2 HAVING sum(t.df) <> 0 ORDER BY 1, 2
"""
COUNTED_DF_SQL = """
SELECT c.name, l.lexeme, count(*)::int
FROM pgrag.chunks ch JOIN pgrag.collections c ON c.id = ch.collection_id,
     unnest(tsvector_to_array(ch.tsv)) AS l(lexeme)
GROUP BY 1, 2 ORDER BY 1, 2
"""
ROWS_SQL = """
SELECT (SELECT count(*) FROM pgrag.bm25_collection_sums),
       (SELECT count(*) FROM pgrag.bm25_term_sums)
"""


def statistics(url: str) -> dict[str, tuple[list[Any], list[Any]]]:
    """{"stored": (totals, df), "counted": (totals, df)}: per collection name its chunks and
    total length, and per (collection, lexeme) its document frequency."""
    with psycopg.connect(url) as conn:
        return {
            "stored": (
                conn.execute(STORED_TOTALS_SQL).fetchall(),
                conn.execute(STORED_DF_SQL).fetchall(),
            ),
            "counted": (
                conn.execute(COUNTED_TOTALS_SQL).fetchall(),
                conn.execute(COUNTED_DF_SQL).fetchall(),
            ),
        }


def assert_exact(url: str) -> dict[str, tuple[list[Any], list[Any]]]:
    """The stored sums equal the counted statistics (and there is something to compare)."""
    got = statistics(url)
    stored_totals, stored_df = got["stored"]
    counted_totals, counted_df = got["counted"]
    assert counted_totals and counted_df
    assert stored_totals == counted_totals
    missing = sorted(set(counted_df) - set(stored_df))[:10]
    extra = sorted(set(stored_df) - set(counted_df))[:10]
    assert stored_df == counted_df, f"missing {missing}, wrong {extra}"
    return got


def row_counts(url: str) -> tuple[int, int]:
    """Rows of the two sums tables (collection totals, term frequencies)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(ROWS_SQL).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])
