"""What a vector costs the set's HNSW graph: inserted one by one into a large graph, or
built in one go (with pgvector's default maintenance_work_mem and with the graph in
memory). Why a large table-source backfill builds its index once at the end
(docs/table-sources.md, "The vector index during a large backfill").

    python benchmarks/ingest/hnsw_build.py [--vectors 100000] [--inserts 5000]
        [--memory 1GB] [--database-url URL]

Random 384-dimension vectors (the hash embedder's kind), the index pgrag builds
(m 16, ef_construction 128, cosine); prints ms a vector and the ratios, in one run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: support.py
import support

VECTORS_SQL = (
    "INSERT INTO t (e) SELECT (SELECT array_agg(random() - 0.5) FROM generate_series(1, 384)"
    " WHERE g > 0)::vector FROM generate_series(1, %s) g"
)
INDEX_SQL = (
    "CREATE INDEX t_hnsw ON t USING hnsw (e vector_cosine_ops) WITH (m = 16, ef_construction = 128)"
)


def _timed(conn: psycopg.Connection, statement: str, params: tuple[int, ...] = ()) -> float:
    t = time.perf_counter()
    conn.execute(statement, params)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vectors", type=int, default=100_000)
    ap.add_argument("--inserts", type=int, default=5_000)
    ap.add_argument("--memory", default="1GB")
    ap.add_argument("--database-url", default=None)
    args = ap.parse_args()
    n, m = args.vectors, args.inserts
    with support.server(args.database_url) as admin:
        dsn = support.fresh_database(admin, "hnsw_build")
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                conn.execute("CREATE TABLE t (id bigserial PRIMARY KEY, e vector(384))")
                conn.execute(VECTORS_SQL, (n,))
                default_mem = conn.execute("SHOW maintenance_work_mem").fetchone()[0]
                build_default = _timed(conn, INDEX_SQL) / n
                insert = _timed(conn, VECTORS_SQL, (m,)) / m
                conn.execute("DROP INDEX t_hnsw")
                conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", (args.memory,))
                build_memory = _timed(conn, INDEX_SQL) / (n + m)
        finally:
            support.drop_database(admin, dsn)
    out = {
        "vectors": n,
        "inserts": m,
        "insert_ms": round(insert * 1000, 3),
        f"build_ms_at_{default_mem}": round(build_default * 1000, 3),
        f"build_ms_at_{args.memory}": round(build_memory * 1000, 3),
        "insert_over_build_in_memory": round(insert / build_memory, 2),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
