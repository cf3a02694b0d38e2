"""Hybrid search under a collection-scoped key against the same search unscoped.

SciFact (precomputed passage vectors) is loaded as two collections, `a` (even passages) and
`b` (odd ones), into a fresh database. Each judged query then runs pgrag.hybrid_search
twice in the same process: unscoped with a collection filter on `a` (the baseline), and as
a key scoped to `a` (pgrag.enter_scope: role pgrag_scoped and the scope's collection ids,
row-level security, no filter), as the server runs it. Prints p50/p95 of both, their ratio
and the overlap of the two top-10s (a scoped key counts every term's document frequency
exactly in its collections; the unscoped search takes very common terms' frequencies from
ANALYZE, so a few ranks may differ).

    python benchmarks/scale/scoped.py [--max-queries 300] [--dsn DSN] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: support.py
from support import (
    RESULTS,
    connect,
    drop_database,
    fresh_database,
    load_corpus,
    load_set,
    percentiles_ms,
    query_vectors,
    server,
)

SEARCH_SQL = "SELECT chunk_id FROM pgrag.hybrid_search(%s, %s, 10, %s)"
SCOPE_SQL = "SELECT pgrag.enter_scope('a')"  # role pgrag_scoped and the scope's ids, as served


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--max-queries", type=int, default=300)
    ap.add_argument("--dsn", default=None, help="admin DSN (default: embedded in a temp dir)")
    ap.add_argument("--out", type=Path, default=RESULTS / "scoped.json")
    args = ap.parse_args(argv)

    s = load_set("scifact", "test", args.max_queries)
    qvec, _ = query_vectors(s.name, s.queries)
    texts = list(s.queries.values())
    with server(args.dsn) as admin:
        dsn = fresh_database(admin, "pgrag_bench_scoped")
        try:
            halves = {}
            for name, part in (("a", slice(0, None, 2)), ("b", slice(1, None, 2))):
                halves[name] = load_corpus(
                    dsn,
                    s.titles[part],
                    s.texts[part],
                    s.vectors[part],
                    s.doc_ids[part],
                    collection=name,
                )
            a_id = halves["a"].collection_id
            times: dict[str, list[float]] = {"unscoped": [], "scoped": []}
            overlap: list[float] = []
            with connect(dsn) as conn:
                conn.execute(SEARCH_SQL, (texts[0], qvec[0], [a_id])).fetchall()  # plans
                for q, v in zip(texts, qvec, strict=True):
                    t = time.perf_counter()
                    base = [r[0] for r in conn.execute(SEARCH_SQL, (q, v, [a_id])).fetchall()]
                    times["unscoped"].append(time.perf_counter() - t)
                    with conn.transaction():
                        conn.execute(SCOPE_SQL)
                        t = time.perf_counter()
                        scoped = [r[0] for r in conn.execute(SEARCH_SQL, (q, v, None)).fetchall()]
                        times["scoped"].append(time.perf_counter() - t)
                    overlap.append(len(set(base) & set(scoped)) / max(len(base), 1))
        finally:
            drop_database(admin, dsn)
    out: dict[str, Any] = {k: percentiles_ms(v) for k, v in times.items()}
    out["scoped_over_unscoped_p50"] = round(out["scoped"]["p50_ms"] / out["unscoped"]["p50_ms"], 2)
    out["scoped_over_unscoped_p95"] = round(out["scoped"]["p95_ms"] / out["unscoped"]["p95_ms"], 2)
    out["top10_overlap_mean"] = round(float(np.mean(overlap)), 4)
    out["queries"] = len(texts)
    print(json.dumps(out, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
