"""Per query, the keyword hits of a key limited to a collection against the unscoped search
filtered to the same collection, on scale.py's synthetic corpus: the chunk ids of both,
and for each query where they differ, how each path weighed the query's terms
(pgrag.bm25_terms: df, whether it generated candidates, whether its postings were capped).

The candidate budget is scaled with the corpus (1,000 postings at 300,000 chunks, scale.py's
default search) so that a small corpus puts the budget where 300,000 chunks put it.
--against FILE then applies an SQL file (another version of sql/functions/20_lexical.sql,
say) and compares again: two versions of the ranking on one corpus, with the latency of
each path as a ratio in the same run.

    python benchmarks/scale/scoped_hits.py --chunks 30000 --queries 60
    git show main:sql/functions/20_lexical.sql > /tmp/old.sql
    python benchmarks/scale/scoped_hits.py --chunks 30000 --against /tmp/old.sql
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: support.py
import scale_load
import support

SEED = 20240601
BUDGET_PER_CHUNK = 1000 / 300_000
SEARCH_SQL = """
SELECT chunk_id FROM pgrag.hybrid_search(
    %(query)s, NULL, 10, %(collections)s, '{}',
    opts => pgrag.ranking_options(lexical_weight => 1, semantic_weight => 0,
                                  candidate_budget => %(budget)s))
"""
# how both paths weighed the terms (least_terms 1: before any term is added for a short pool)
TERMS_SQL = """
SELECT t.i, t.lexeme, t.df::int, t.generates, t.capped
FROM pgrag.bm25_terms(pgrag.lexical_query(%(query)s), %(collections)s, %(budget)s, 1) t
ORDER BY t.i
"""


def search(
    conn: psycopg.Connection, params: dict[str, Any], scoped: bool, seconds: list[float]
) -> list[int]:
    t = time.perf_counter()
    with conn.transaction():
        if scoped:
            conn.execute("SELECT pgrag.enter_scope('scale')")
        ids = [r[0] for r in conn.execute(SEARCH_SQL, params).fetchall()]
    seconds.append(time.perf_counter() - t)
    return ids


def compare(
    conn: psycopg.Connection, queries: list[str], budget: float, verbose: bool = True
) -> dict[str, Any]:
    cid = conn.execute("SELECT id FROM pgrag.collections WHERE name = 'scale'").fetchone()[0]
    hits: dict[str, list[int]] = {"collection": [], "scoped_key": []}
    seconds: dict[str, list[float]] = {"collection": [], "scoped_key": []}
    differ = 0
    for q in queries:
        params = {"query": q, "collections": [cid], "budget": budget}
        filtered = search(conn, params, False, seconds["collection"])
        scoped = search(conn, params, True, seconds["scoped_key"])
        hits["collection"].append(len(filtered))
        hits["scoped_key"].append(len(scoped))
        if filtered == scoped:
            continue
        differ += 1
        if not verbose:
            continue
        print(
            f"\n{q!r}: collection {len(filtered)} hits, scoped key {len(scoped)} hits, "
            f"{len(set(filtered) & set(scoped))} in common"
        )
        rows = conn.execute(TERMS_SQL, params).fetchall()
        terms = ", ".join(
            f"{lex}(df {df}{', GEN' if gen else ''}{', capped' if cap else ''})"
            for _, lex, df, gen, cap in rows
        )
        print(f"   {terms}")
    return {
        "queries": len(queries),
        "queries_with_different_ids": differ,
        **{f"mean_hits_{k}": round(float(np.mean(v)), 2) for k, v in hits.items()},
        "queries_under_10_hits": {k: sum(n < 10 for n in v) for k, v in hits.items()},
        "latency": {k: support.percentiles_ms(v) for k, v in seconds.items()},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--chunks", type=int, default=30_000)
    p.add_argument("--queries", type=int, default=60)
    p.add_argument("--budget", type=float, default=None, help="default: scaled with --chunks")
    p.add_argument("--against", type=Path, default=None, help="SQL file to compare with")
    p.add_argument("--dsn", default=None, help="admin DSN (default: embedded in a temp dir)")
    args = p.parse_args(argv)
    budget = args.budget or round(BUDGET_PER_CHUNK * args.chunks)
    src = support.load_set("scifact", "test")
    queries = list(src.queries.values())[: args.queries]
    corpus = scale_load.synthesize(src, args.chunks, np.random.default_rng(SEED))
    with support.server(args.dsn) as admin:
        dsn = support.fresh_database(admin, "pgrag_bench_scoped_hits")
        try:
            scale_load.load(dsn, *corpus, scale_load.maintenance_work_mem(args.chunks))
            with support.connect(dsn) as conn:
                print(f"{args.chunks} chunks, budget {budget}")
                compare(conn, queries, budget, verbose=False)  # warm-up: every query once
                now = compare(conn, queries, budget)
                print(f"\ninstalled functions: {now}")
                if args.against:
                    conn.execute(args.against.read_text().encode())
                    compare(conn, queries, budget, verbose=False)
                    old = compare(conn, queries, budget)
                    print(f"\n{args.against}: {old}")
                    for k, v in now["latency"].items():
                        ratios = {m: round(v[m] / old["latency"][k][m], 2) for m in v if m != "n"}
                        print(f"   {k}: installed / {args.against.name} {ratios}")
        finally:
            support.drop_database(admin, dsn)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
