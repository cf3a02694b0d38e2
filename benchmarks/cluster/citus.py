"""SciFact on one server and on a 2-worker Citus cluster, through pgrag's search service.

The 5,183 SciFact passages are split over COLLECTIONS collections (crc32 of the BEIR id
modulo COLLECTIONS) and loaded, with the cached full-passage vectors (nothing embedded at
run time but the 300 test queries, once, cached), into

- `single`: a plain PostgreSQL database (on the coordinator's server, without the citus
  extension, PGRAG_DISTRIBUTED=false: the same binaries and settings as the cluster), and
- `cluster`: a database distributed by `PGRAG_DISTRIBUTED=true pgrag migrate` over a
  coordinator and two workers (tests/support/citus.py builds and starts them).

Then every test query runs through `SearchService.search` (what REST, MCP and the CLI
call; the query vector comes from the cache instead of the model) in each mode, unscoped
(all collections) and scoped to the collection holding the query's first relevant
passage, on both. Printed in one run and written to benchmarks/results/citus.json:

- nDCG@10 of each (single and cluster must agree within 0.005; a difference is named,
  with the queries whose top 10 differ);
- per-query latency p50/p95 of each, of the whole search and of its ranking SQL alone
  (the engine's ranking call, timed by a wrapper), and the ratios cluster / single;
- shards touched per query on the cluster (distinct shard groups in the remote commands
  Citus logs with citus.log_remote_commands, a separate untimed pass);
- load throughput (bulk COPY + HNSW, chunks/s), and pgrag's own ingestion path
  (Ingestor, one transaction per document, `hash/384` embedder so that no model time
  counts) on --ingest-docs more passages;
- per-shard figures for the cost model: HNSW / GIN / table bytes per chunk on the
  workers' shards, and SQL probes: a kNN on one shard, the same over every shard, and a
  fan-out that finds nothing (the per-task overhead).

    python benchmarks/cluster/citus.py [--docs N] [--queries N] [--modes hybrid,keyword,semantic]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: support.py
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: tests.support
import support
from citus_load import (
    COLLECTIONS,
    CachedQueries,
    Loaded,
    collection_of,
    load,
    subset,
)
from citus_measure import (
    WARMUP,
    per_chunk,
    probes,
    run_searches,
    shards_touched,
    sizes,
)

from pgrag.embeddings.hashing import HashEmbedder
from tests.support.citus import CitusCluster, citus_cluster, migrate

TOLERANCE = 0.005
SIDES = ("single", "cluster")


# -- the corpus ----------------------------------------------------------------------------


# -- loading -------------------------------------------------------------------------------


# -- searching -----------------------------------------------------------------------------


# -- per-shard figures ---------------------------------------------------------------------


# -- pgrag's ingestion path ----------------------------------------------------------------


async def ingest_path(
    dsn: str, s: support.BeirSet, first: int, docs: int, tmp: Path
) -> dict[str, Any]:
    """`docs` passages as .txt files through pgrag's Ingestor (parse, chunk, one transaction
    per document, `hash/384` vectors: no model time) into a collection of their own."""
    from pgrag.db.database import open_database
    from pgrag.ingest.pipeline import Ingestor
    from pgrag.settings import load_settings

    root = tmp / "ingest"
    root.mkdir(parents=True, exist_ok=True)
    picked = range(first, min(first + docs, len(s.doc_ids)))
    for i in picked:
        (root / f"{s.doc_ids[i]}.txt").write_text(
            support.embed_text(s.titles[i], s.texts[i]), encoding="utf-8"
        )
    async with open_database(load_settings(), dsn=dsn, max_size=4) as db:
        t = time.perf_counter()
        summary = await Ingestor(db.pool, HashEmbedder("hash/384"), collection="ingest").run([root])
        seconds = time.perf_counter() - t
        async with db.pool.connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT count(*) FROM pgrag.chunks c JOIN pgrag.collections k"
                    " ON k.id = c.collection_id WHERE k.name = 'ingest'"
                )
            ).fetchone()
    chunks = int(row[0]) if row else 0
    return {
        "documents": len(picked),
        "failures": len(summary.failures),
        "chunks": chunks,
        "seconds": round(seconds, 2),
        "documents_per_s": round(len(picked) / seconds, 1),
        "chunks_per_s": round(chunks / seconds, 1),
    }


# -- the run -------------------------------------------------------------------------------


def shard_groups(dsn: str) -> dict[int, int]:
    """shard id -> index of its hash range (co-located shards share one)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT s.shardid, s.shardminvalue::int FROM pg_dist_shard s"
            " JOIN pg_dist_partition p ON p.logicalrelid = s.logicalrelid"
            " WHERE p.partmethod = 'h'"
        ).fetchall()
    order = {v: i for i, v in enumerate(sorted({r[1] for r in rows}))}
    return {int(r[0]): order[r[1]] for r in rows}


def worker_dsns(cluster: CitusCluster, db: str) -> list[str]:
    return [cluster.dsn(db, port) for port in cluster.worker_ports]


@contextmanager
def databases(cluster: CitusCluster) -> Iterator[dict[str, str]]:
    """`single`: plain PostgreSQL (no citus extension) on the coordinator's server;
    `cluster`: distributed by pgrag's migration."""
    with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
        conn.execute('CREATE DATABASE "bench_single"')
    single = cluster.dsn("bench_single")
    asyncio.run(migrate(single, False))
    dist = cluster.create_database("bench_cluster")
    asyncio.run(migrate(dist, True))
    yield {"single": single, "cluster": dist}


def compare(runs: dict[str, dict[str, Any]], qrels: dict[str, dict[str, int]]) -> dict[str, Any]:
    """nDCG@10 per side, p50/p95 per side, ratio, and where the rankings differ."""
    out: dict[str, Any] = {}
    for key in runs["single"]:
        a, b = runs["single"][key], runs["cluster"][key]
        na = support.evaluate(a["run"], qrels)["nDCG@10"]
        nb = support.evaluate(b["run"], qrels)["nDCG@10"]
        la, lb = support.percentiles_ms(a["seconds"]), support.percentiles_ms(b["seconds"])
        ra, rb = support.percentiles_ms(a["ranking"]), support.percentiles_ms(b["ranking"])
        differ = [q for q in a["run"] if a["run"][q] != b["run"][q]]
        out[key] = {
            "nDCG@10": {"single": na, "cluster": nb, "diff": round(nb - na, 4)},
            "equal_within_tolerance": abs(nb - na) <= TOLERANCE,
            "queries_with_other_top10": len(differ),
            "first_differing": differ[:5],
            "latency_ms": {"single": la, "cluster": lb},
            "p50_ratio": round(lb["p50_ms"] / la["p50_ms"], 2),
            "p95_ratio": round(lb["p95_ms"] / la["p95_ms"], 2),
            "ranking_sql_ms": {"single": ra, "cluster": rb},
            "ranking_p50_ratio": round(rb["p50_ms"] / ra["p50_ms"], 2),
            "ranking_p95_ratio": round(rb["p95_ms"] / ra["p95_ms"], 2),
        }
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--docs", type=int, default=None, help="passages (default all 5,183)")
    p.add_argument("--queries", type=int, default=None, help="test queries (default all 300)")
    p.add_argument("--modes", default="hybrid,keyword,semantic")
    p.add_argument("--shard-queries", type=int, default=60, help="queries of the shard pass")
    p.add_argument("--ingest-docs", type=int, default=300, help="passages through Ingestor")
    p.add_argument("--out", type=Path, default=support.RESULTS / "citus.json")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    full = support.load_set("scifact", "test", None, "full")
    s = subset(full, args.docs, args.queries)
    rest = [i for i, d in enumerate(full.doc_ids) if d not in set(s.doc_ids)]
    qvec, _ = support.query_vectors("scifact", s.queries)
    provider = CachedQueries(dict(zip(s.queries.values(), qvec, strict=True)))
    split = {d: collection_of(d) for d in s.doc_ids}
    print(
        f"SciFact test: {len(s.doc_ids)} passages over {COLLECTIONS} collections "
        f"({[sum(1 for v in split.values() if v == k) for k in range(COLLECTIONS)]}), "
        f"{len(s.queries)} queries, modes {modes}",
        flush=True,
    )
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "passages": len(s.doc_ids),
        "queries": len(s.queries),
        "collections": COLLECTIONS,
        "split_rule": "crc32(BEIR id) % 4",
        "scoped_to": "the collection holding the query's first relevant passage",
        "latency": "SearchService.search wall time, limit 10, one query at a time on one "
        f"connection after {WARMUP} warm-up queries; query vectors precomputed",
    }
    os.environ.pop("PGRAG_DISTRIBUTED", None)  # each database is migrated explicitly
    t0 = time.perf_counter()
    with citus_cluster(workers=2) as cluster, databases(cluster) as dsns:
        print(f"cluster up in {time.perf_counter() - t0:.1f}s (build cached)", flush=True)
        groups = shard_groups(dsns["cluster"])
        result["environment"] = environment(dsns["single"], len(set(groups.values())))
        loaded: dict[str, Loaded] = {}
        for side in SIDES:
            loaded[side] = load(dsns[side], s)
            print(f"{side}: loaded {loaded[side].chunks} chunks {loaded[side].timings}", flush=True)
        names = loaded["single"].names
        with psycopg.connect(dsns["cluster"]) as conn:
            result["shard_group_of_collection"] = {
                names[i]: groups[
                    conn.execute(
                        "SELECT get_shard_id_for_distribution_column('pgrag.chunks', %s)", (cid,)
                    ).fetchone()[0]
                ]
                for i, cid in loaded["cluster"].collections.items()
            }
        result["shard_pass_queries"] = min(args.shard_queries, len(s.queries))
        scope_of = {q: names[split[next(iter(s.qrels[q]))]] for q in s.queries}
        runs = {}
        for side in SIDES:
            print(f"{side}: searching", flush=True)
            runs[side] = asyncio.run(run_searches(dsns[side], s, provider, modes, scope_of))
        touched = asyncio.run(
            shards_touched(
                dsns["cluster"], s, provider, modes, scope_of, groups, args.shard_queries
            )
        )
        cluster_sizes = sizes(worker_dsns(cluster, "bench_cluster"), groups)
        single_sizes = sizes([dsns["single"]], {})
        texts = list(s.queries.values())
        result["probes_ms"] = {
            side: probes(dsns[side], loaded[side], qvec, texts) for side in SIDES
        }
        with tempfile.TemporaryDirectory(prefix="pgrag-citus-bench-") as tmp:
            first = 0 if not rest else rest[0]
            ingest = {}
            for side in SIDES:
                docs = args.ingest_docs
                ingest[side] = asyncio.run(
                    ingest_path(dsns[side], full, first, docs, Path(tmp) / side)
                )
                print(f"{side}: Ingestor {ingest[side]}", flush=True)
        result["load"] = {side: loaded[side].timings for side in SIDES}
        result["ingest_path"] = ingest
        result["search"] = compare(runs, s.qrels)
        for key, shards in touched.items():
            result["search"][key]["cluster_shards"] = shards
        result["sizes"] = {
            "single": single_sizes["0"],
            "single_per_chunk": per_chunk(single_sizes),
            "cluster_shard_groups": cluster_sizes,
            "cluster_per_chunk": per_chunk(cluster_sizes),
        }
    result["wall_s"] = round(time.perf_counter() - started, 1)
    report(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.out} in {result['wall_s']} s")
    return 0


def environment(dsn: str, shard_count: int) -> dict[str, Any]:
    with psycopg.connect(dsn) as conn:
        pg = conn.execute("SELECT current_setting('server_version')").fetchone()
        vec = conn.execute(
            "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    load = Path("/proc/loadavg").read_text().split()[:3]
    return {
        "postgres": pg[0] if pg else None,
        "pgvector": vec[0] if vec else None,
        "citus": "14.0.1",
        "workers": 2,
        "shards": shard_count,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_at_start": load,
        "nodes": "coordinator and 2 workers on this machine, shared_buffers 64MB each, "
        "fsync off (tests/support/citus.py); `single` is a database on the coordinator's "
        "server without the citus extension",
    }


def report(r: dict[str, Any]) -> None:
    print(f"\n== SciFact test, {r['passages']} passages, {r['queries']} queries, "
          f"{r['collections']} collections; {r['environment']['shards']} shards on 2 workers")  # fmt: skip
    print(f"{'mode/scope':<16} {'nDCG single':>11} {'cluster':>8} {'diff':>7}  "
          f"{'p50 s / c':>15} {'p95 s / c':>15} {'p50 x':>6} {'p95 x':>6} {'shards':>7}")  # fmt: skip
    for key, m in r["search"].items():
        n, lat = m["nDCG@10"], m["latency_ms"]
        shards = m.get("cluster_shards", {}).get("shards_per_query", {})
        print(
            f"{key:<16} {n['single']:11.4f} {n['cluster']:8.4f} {n['diff']:+7.4f}  "
            f"{lat['single']['p50_ms']:7.1f}/{lat['cluster']['p50_ms']:<7.1f} "
            f"{lat['single']['p95_ms']:7.1f}/{lat['cluster']['p95_ms']:<7.1f} "
            f"{m['p50_ratio']:6.2f} {m['p95_ratio']:6.2f} {shards.get('median', '-'):>7}"
        )
    print("ranking SQL alone (pgrag.hybrid_search), ms single / cluster:")
    for key, m in r["search"].items():
        a, b = m["ranking_sql_ms"]["single"], m["ranking_sql_ms"]["cluster"]
        print(
            f"  {key:<16} p50 {a['p50_ms']:7.1f}/{b['p50_ms']:<7.1f} ({m['ranking_p50_ratio']}x)"
            f"  p95 {a['p95_ms']:7.1f}/{b['p95_ms']:<7.1f} ({m['ranking_p95_ratio']}x)"
        )
    for key, m in r["search"].items():
        if not m["equal_within_tolerance"]:
            print(f"NOT EQUAL within {TOLERANCE}: {key} differs by {m['nDCG@10']['diff']:+.4f}; "
                  f"{m['queries_with_other_top10']} queries have another top 10, e.g. "
                  f"{m['first_differing']}")  # fmt: skip
    if all(m["equal_within_tolerance"] for m in r["search"].values()):
        print(f"nDCG@10: cluster equals single within {TOLERANCE} in every mode and scope")
    print(
        "load (bulk COPY + HNSW):", {k: v["chunks_per_s"] for k, v in r["load"].items()}, "chunks/s"
    )
    print(
        "pgrag Ingestor (hash/384):",
        {k: v["chunks_per_s"] for k, v in r["ingest_path"].items()},
        "chunks/s",
    )
    print("bytes per chunk, single:", r["sizes"]["single_per_chunk"])
    print("bytes per chunk, cluster shards:", r["sizes"]["cluster_per_chunk"])
    print("probes ms p50/p95:")
    for name in r["probes_ms"]["single"]:
        a, b = r["probes_ms"]["single"][name], r["probes_ms"]["cluster"][name]
        print(f"  {name:<26} single {a['p50_ms']:6.2f}/{a['p95_ms']:<6.2f} cluster "
              f"{b['p50_ms']:6.2f}/{b['p95_ms']:<6.2f}")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
