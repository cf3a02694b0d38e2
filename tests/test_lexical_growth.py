"""The rows the lexical leg reads per search stay bounded as the collection grows: a term
holding more chunks than the candidate budget is read only up to the budget, chunks holding
the most other query terms first (pgrag.capped_postings), and every caller, unscoped or
not, ranks terms by their exact document frequency (pgrag.bm25_terms). Rows are counted
(pg_stat_get_xact_tuples_fetched), never timed."""

from __future__ import annotations

import psycopg

from tests.support.lexical_growth import add, rows_read

QUERY = "zephyr harbour"
# candidate_budget: postings of a common term read; rescore_size: chunks read again by id
BOUNDS_SQL = "SELECT candidate_budget + rescore_size FROM pgrag.fusion_defaults()"
RARE = 20  # chunks holding the rare term: fewer than the pool, so the next term generates
DF_SQL = """
SELECT t.lexeme, t.df::int, t.generates, t.capped
FROM pgrag.bm25_terms(pgrag.lexical_query(%s), %s, 1000, 2) t ORDER BY t.i
"""


def _setup(conn: psycopg.Connection) -> int:
    row = conn.execute("INSERT INTO pgrag.collections (name) VALUES ('harbour') RETURNING id")
    cid = int(row.fetchone()[0])  # type: ignore[index]
    add(conn, cid, "zephyr harbour", 5, "best")
    add(conn, cid, "zephyr", RARE - 5, "rare")
    return cid


def _grow(conn: psycopg.Connection, cid: int, n: int, tag: str) -> None:
    add(conn, cid, "harbour", n, tag)
    conn.execute("ANALYZE pgrag.chunks")  # N of an unscoped search: the planner's estimate


def test_rows_read_stay_bounded_as_a_terms_df_grows(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cid = _setup(conn)
        scopes = {"unscoped": None, "collection": [cid]}
        _grow(conn, cid, 2000, "small")
        small = {k: rows_read(conn, QUERY, ids) for k, ids in scopes.items()}
        _grow(conn, cid, 8000, "large")
        large = {k: rows_read(conn, QUERY, ids) for k, ids in scopes.items()}
        pool = [
            c
            for (c,) in conn.execute(
                "SELECT c.content FROM pgrag.lexical_candidates(%s) x"
                " JOIN pgrag.chunks c ON c.id = x.chunk_id ORDER BY x.rank",
                (QUERY,),
            )
        ]
        bound = RARE + conn.execute(BOUNDS_SQL).fetchone()[0]  # type: ignore[index]
    for k in scopes:
        # harbour's df grew from 2,005 to 10,005: the rows read did not
        assert large[k] <= bound, (k, small, large)
        assert large[k] == small[k], (k, small, large)
    # the rare term's chunks lead the pool (harbour's idf is near 0), the pool is full
    assert all(c.startswith("zephyr ") for c in pool[:RARE]) and len(pool) == 100, pool


def test_every_caller_ranks_terms_by_exact_df(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cid = _setup(conn)
        _grow(conn, cid, 2000, "small")
        unscoped = conn.execute(DF_SQL, (QUERY, None)).fetchall()
        scoped = conn.execute(DF_SQL, (QUERY, [cid])).fetchall()
    # ANALYZE's estimate for the unscoped caller no more: both take the sums' exact df;
    # zephyr is in fewer chunks than the pool, so harbour generates too, capped
    assert unscoped == scoped == [("zephyr", 20, True, False), ("harbour", 2005, True, True)]
