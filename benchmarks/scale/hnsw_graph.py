"""HNSW graph parameters against recall at scale.py's corpus size: the vectors of
`scale.py --chunks N` (same seed: SciFact passages plus noise) in a bare table, one pgvector
HNSW index per (m, ef_construction) built and timed, then recall@10 of an index scan at each
ef_search against exact search done in numpy (every SciFact test claim by default), with its
latency. The product's index and ef_search rule come from what this prints.

    python benchmarks/scale/hnsw_graph.py --chunks 1000000 --graphs 16:64,16:128,24:64 --label L
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: support.py
import scale_load
import support
from scale import SEED

K = 10
EF_SWEEP = (100, 200, 400, 633, 800, 1000)
RESULTS = Path(__file__).resolve().parents[1] / "results" / "hnsw.json"
TABLE_SQL = "CREATE TABLE v (id int PRIMARY KEY, embedding vector({dims}))"
INDEX_SQL = (
    "CREATE INDEX v_hnsw ON v USING hnsw (embedding vector_cosine_ops)"
    " WITH (m = {m}, ef_construction = {efc})"
)
SEARCH_SQL = "SELECT id FROM v ORDER BY embedding <=> %s LIMIT 10"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--chunks", type=int, default=100_000)
    p.add_argument("--graphs", default="16:64,16:128,24:64", help="m:ef_construction,...")
    p.add_argument("--ef", default=",".join(map(str, EF_SWEEP)), help="ef_search values")
    p.add_argument("--queries", type=int, default=300, help="SciFact test claims (300 at most)")
    p.add_argument("--label", default="hnsw")
    p.add_argument("--dsn", help="admin DSN of a server (default: an embedded one)")
    p.add_argument("--out", type=Path, default=RESULTS)
    return p.parse_args(argv)


def exact_top(vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Row numbers of each query's K nearest vectors by cosine (vectors are unit length)."""
    q = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    sims = q @ vectors.T
    top = np.argpartition(-sims, K, axis=1)[:, :K]
    return np.take_along_axis(top, np.argsort(-np.take_along_axis(sims, top, 1), 1), 1)


def load(conn: psycopg.Connection, vectors: np.ndarray) -> float:
    t = time.perf_counter()
    conn.execute(TABLE_SQL.format(dims=vectors.shape[1]))
    with conn.cursor() as cur, cur.copy("COPY v (id, embedding) FROM STDIN") as copy:
        copy.set_types(["int4", "vector"])
        for i, vec in enumerate(vectors):
            copy.write_row((i, vec))
    conn.execute("VACUUM ANALYZE v")
    return round(time.perf_counter() - t, 1)


def sweep(
    conn: psycopg.Connection, queries: np.ndarray, truth: np.ndarray, efs: list[int]
) -> dict[str, Any]:
    """recall@10 and latency of the index scan at each ef_search (iterative scans off: a
    LIMIT 10 scan never needs them)."""
    out: dict[str, Any] = {}
    for ef in efs:
        conn.execute(f"SET hnsw.ef_search = {ef}")
        for q in queries[:5]:
            conn.execute(SEARCH_SQL, (q,)).fetchall()  # warm
        hits, seconds = 0, []
        for q, want in zip(queries, truth, strict=True):
            t = time.perf_counter()
            got = {r[0] for r in conn.execute(SEARCH_SQL, (q,)).fetchall()}
            seconds.append(time.perf_counter() - t)
            hits += len(got & set(want.tolist()))
        out[str(ef)] = {
            "recall_at_10": round(hits / truth.size, 4),
            **support.percentiles_ms(seconds),
        }
        print(f"      ef_search {ef}: {out[str(ef)]}", flush=True)
    return out


def build(conn: psycopg.Connection, m: int, efc: int, mwm: str) -> dict[str, Any]:
    conn.execute("DROP INDEX IF EXISTS v_hnsw")
    conn.execute(f"SET maintenance_work_mem = '{mwm}'")
    t = time.perf_counter()
    conn.execute(INDEX_SQL.format(m=m, efc=efc))
    seconds = round(time.perf_counter() - t, 1)
    size = conn.execute("SELECT pg_relation_size('v_hnsw')").fetchone()[0]
    return {"build_s": seconds, "index_mb": round(size / 2**20, 1)}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rng = np.random.default_rng(SEED)
    src = support.load_set("scifact", "test")
    qvec, _ = support.query_vectors("scifact", src.queries)
    queries = qvec[: args.queries].astype(np.float32)
    _, _, vectors = scale_load.synthesize(src, args.chunks, rng)
    vectors = vectors.astype(np.float32)
    truth = exact_top(vectors, queries)
    efs = [int(x) for x in args.ef.split(",")]
    mwm = scale_load.maintenance_work_mem(args.chunks * 2)  # room for denser graphs
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "chunks": args.chunks,
        "queries": len(queries),
        "corpus": "scale.py's vectors (same seed)",
        "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3],
        "graphs": {},
    }
    with support.server(args.dsn) as admin:
        dsn = support.fresh_database(admin, "pgrag_bench_hnsw")
        try:
            with support.connect(dsn) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                result["load_s"] = load(conn, vectors)
                print(f"loaded {args.chunks} vectors in {result['load_s']} s", flush=True)
                for graph in args.graphs.split(","):
                    m, efc = (int(x) for x in graph.split(":"))
                    print(f"   m {m}, ef_construction {efc} ...", flush=True)
                    g = build(conn, m, efc, mwm)
                    print(f"      {g}", flush=True)
                    g["sweep"] = sweep(conn, queries, truth, efs)
                    result["graphs"][graph] = g
                    save(args, result)
        finally:
            support.drop_database(admin, dsn)
    result["loadavg_at_end"] = Path("/proc/loadavg").read_text().split()[:3]
    save(args, result)
    return 0


def save(args: argparse.Namespace, result: dict[str, Any]) -> None:
    data = json.loads(args.out.read_text()) if args.out.exists() else {}
    data[args.label] = result
    args.out.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
