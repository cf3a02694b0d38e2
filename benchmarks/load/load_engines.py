"""The bundled model's engines under load (#43): `pgrag serve --transport http` on SciFact
started once per engine (PGRAG_EMBEDDING_ENGINE) and driven by N MCP clients (default 10,
the official client, closed loop) whose every query is new to that server (a fresh process
has an empty query-vector cache, so each search pays a model call). Rounds alternate the
engines' order; every engine gets the same queries in a round, each round new ones.
Per engine: p50/p95 of the searches (each round's, and their medians), throughput,
errors, the server's peak RSS while it ran and its RSS after the run; then p95 against
`onnx`'s (today's engine; target: lower) and RSS against 500 MB.

    python benchmarks/load/load_engines.py [--engines openvino,onnx] [--clients 10]
        [--searches 250] [--rounds 3] [--client sdk|light] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from statistics import median
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: support.py
from load import drive, measured, split_work
from server_side import COLLECTION, RssSampler, free_port, start_server
from support import (
    DATA,
    RESULTS,
    beir_io,
    drop_database,
    fresh_database,
    load_corpus,
    load_set,
    server,
)

BASELINE = "onnx"
RSS_TARGET_MB = 500


def one_server(
    dsn: str, engine: str, work: list[list[str]], warm: list[list[str]], client: str
) -> dict[str, Any]:
    """A fresh `pgrag serve` on `engine`: warmed up (model loaded, pool filled) on queries
    no measured run uses, then the measured run; its RSS peak and after."""
    port = free_port()
    proc = start_server(dsn, port, {"PGRAG_EMBEDDING_ENGINE": engine})
    sampler = RssSampler(proc.pid)
    sampler.start()
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        asyncio.run(drive(url, warm))
        ps = psutil.Process(proc.pid)
        run = measured(url, work, ps, client)
        run["rss_after_mb"] = round(ps.memory_info().rss / 2**20, 1)
    finally:
        sampler.stop.set()
        proc.terminate()
        proc.wait(timeout=30)
    run["peak_rss_mb"] = round(sampler.peak / 2**20, 1)
    run["engine"] = engine
    return run


def summary(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per engine, medians over the rounds; p95 against the baseline's median p95."""

    def p95(rs: list[dict[str, Any]]) -> float:
        return float(median(r["latency_ms"]["p95"] for r in rs))

    out: dict[str, Any] = {}
    base = p95(runs[BASELINE]) or 1.0
    for name, rs in runs.items():
        out[name] = {
            "p50_ms": round(median(r["latency_ms"]["p50"] for r in rs), 2),
            "p95_ms": p95(rs),
            "p95_by_round": [r["latency_ms"]["p95"] for r in rs],
            "p95_vs_onnx": round(p95(rs) / base, 3),
            "throughput_qps_median": round(median(r["throughput_qps"] for r in rs), 2),
            "errors": sum(r["errors"] for r in rs),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
            "rss_after_mb_max": max(r["rss_after_mb"] for r in rs),
            "rss_within_500mb": max(r["peak_rss_mb"] for r in rs) <= RSS_TARGET_MB,
        }
    return out


def run_all(args: argparse.Namespace, dsn: str, queries: list[str]) -> dict[str, Any]:
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if BASELINE not in engines:
        engines.append(BASELINE)
    per_client = -(-args.searches // args.clients)
    warm = split_work(queries, len(queries) - 6, 2, 3)
    runs: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
    for r in range(args.rounds):
        work = split_work(queries, r * args.clients * per_client, args.clients, per_client)
        for engine in engines if r % 2 == 0 else engines[::-1]:
            got = one_server(dsn, engine, work, warm, args.client)
            runs[engine].append(got)
            print(
                f"round {r + 1} {engine}: p50 {got['latency_ms']['p50']} ms, p95"
                f" {got['latency_ms']['p95']} ms, {got['throughput_qps']} searches/s,"
                f" {got['errors']} errors, peak RSS {got['peak_rss_mb']} MB,"
                f" after {got['rss_after_mb']} MB",
                flush=True,
            )
    return {"engines": engines, "runs": runs, "summary": summary(runs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--engines", default="openvino,onnx", help="comma list; onnx is the baseline")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--searches", type=int, default=250, help="per run, shared by its clients")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--client", choices=["sdk", "light"], default="sdk")
    ap.add_argument("--dsn", default=None, help="admin DSN of a server (default: embedded)")
    ap.add_argument("--out", type=Path, default=RESULTS / "load-engines.json")
    args = ap.parse_args(argv)

    data = load_set("scifact", "test")
    queries = list(beir_io.load_queries(str(DATA / "scifact")).values())  # all 1,109
    if args.rounds * args.searches + 6 > len(queries):
        raise SystemExit(f"--rounds x --searches must stay within {len(queries) - 6} queries")
    results: dict[str, Any] = {"set": "scifact", "clients": args.clients, "client": args.client}
    with server(args.dsn) as admin:
        dsn = fresh_database(admin, "pgrag_bench_load_engines")
        try:
            load_corpus(
                dsn, data.titles, data.texts, data.vectors, data.doc_ids, collection=COLLECTION
            )
            results.update(run_all(args, dsn, queries))
        finally:
            drop_database(admin, dsn)
    results["load_avg_after"] = list(os.getloadavg())
    for name, s in results["summary"].items():
        print(
            f"{name}: p95 {s['p95_ms']} ms (median of {args.rounds} rounds) ="
            f" {s['p95_vs_onnx']}x onnx's (target < 1); p50 {s['p50_ms']}"
            f" ms; {s['throughput_qps_median']} searches/s; {s['errors']} errors; peak RSS"
            f" {s['peak_rss_mb']} MB ({'within' if s['rss_within_500mb'] else 'OVER'} 500 MB)"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
