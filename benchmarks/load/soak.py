"""Soak benchmark: N MCP clients searching and one writer ingesting, for minutes on end.

Loads SciFact (precomputed passage vectors, see benchmarks/support.py) into a fresh
database and starts `pgrag serve --transport http` as a subprocess, as load.py does. Then,
for `--minutes`, `--clients` MCP sessions (Streamable HTTP) search in a loop over the
SciFact test claims while one writer adds, changes and deletes generated text files in a
temp folder and runs `pgrag ingest` on it (collection `soakwrite`, the hash embedder so
the writer exercises the database, not the model), checking after each round that the
collection matches the folder. Every window it prints searches, errors, p50/p95, the
server's RSS (process + children), the connections open to the database and the writer's
progress; at the end p95 drift, RSS drift and the verdicts. Targets: zero errors, RSS
growth < 10 %. With `--hostile-phase S` the run is a warm-up of S/2 seconds and three
phases of S: the normal clients alone, with the hostile client of hostile_client.py, and
alone again; the report compares their p50/p95 (target: p95 within 20 %).

    python benchmarks/load/soak.py [--minutes 10] [--clients 10] [--interval 30] [--dsn DSN]
    python benchmarks/load/soak.py --hostile-phase 90
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import psutil
import psycopg
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: support.py
from hostile_client import (
    NORMAL_KEY,
    HostileStats,
    bearer,
    ingest_corpus,
    write_corpus,
)
from hostile_phases import (
    PhaseClock,
    hostile_phases,
    phase_report,
    postgres_process,
    print_phase_report,
)
from server_side import free_port
from soak_report import Stats, connections, print_summary, sampler, summarise, table_mb
from soak_server import COLLECTION, log_problems, start_server, stop_server
from soak_writer import WRITE_COLLECTION, WRITE_MODEL, Writer, writer_loop
from support import RESULTS, drop_database, fresh_database, load_corpus, load_set, server

MIN_WINDOWS = 6
STOP_GRACE_S = 90.0


# -- shared counters ---------------------------------------------------------------------


# -- the server --------------------------------------------------------------------------


# -- the clients -------------------------------------------------------------------------


async def search_client(
    url: str, queries: list[str], start: int, mode: str, stats: Stats, stop: asyncio.Event
) -> None:
    """One MCP session searching until `stop`; a transport failure counts as an error and
    the client reconnects, as a real client would."""
    i = start
    while not stop.is_set():
        try:
            async with (
                httpx2.AsyncClient(headers=bearer(NORMAL_KEY), timeout=httpx2.Timeout(60)) as hc,
                streamable_http_client(url, http_client=hc) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                while not stop.is_set():
                    q = queries[i % len(queries)]
                    i += 1
                    t = time.perf_counter()
                    try:
                        r = await session.call_tool(
                            "search",
                            {"query": q, "mode": mode, "limit": 10, "content_mode": "none"},
                        )
                    except Exception as exc:  # any failure is a data point
                        stats.search(time.perf_counter() - t, f"{type(exc).__name__}: {exc}")
                        break  # a fresh session rather than a possibly broken one
                    error = str(r.structured_content or r.content)[:300] if r.is_error else None
                    stats.search(time.perf_counter() - t, error)
        except Exception as exc:  # the session itself failed
            stats.search(None, f"session {type(exc).__name__}: {exc}")
            await asyncio.sleep(1)


# -- the writer --------------------------------------------------------------------------


# -- sampling ----------------------------------------------------------------------------


# -- the run -----------------------------------------------------------------------------


async def soak(
    args: argparse.Namespace,
    dsn: str,
    url: str,
    proc: psutil.Process,
    queries: list[str],
    texts: list[str],
    folder: Path,
) -> dict[str, Any]:
    stats = Stats()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def graceful() -> None:  # first Ctrl-C: finish the window and report; second: abort
        print("\nstopping (Ctrl-C again to abort)", file=sys.stderr, flush=True)
        stop.set()
        loop.remove_signal_handler(signal.SIGINT)

    loop.add_signal_handler(signal.SIGINT, graceful)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    duration = args.minutes * 60
    interval = min(args.interval, duration / MIN_WINDOWS)
    windows = max(1, round(duration / interval))
    writer = Writer(folder, dsn, texts, args.writer_files, args.writer_churn)

    if args.hostile_phase:
        write_corpus(folder.parent / "hostile")
        await ingest_corpus(dsn, folder.parent / "hostile")
    async with await psycopg.AsyncConnection.connect(
        dsn, autocommit=True, application_name="pgrag-soak-monitor"
    ) as conn:
        # warm-up, outside the windows: the model loaded, the writer's collection created
        warm = Stats()
        warm_stop = asyncio.Event()
        warm_task = asyncio.create_task(search_client(url, queries, 0, args.mode, warm, warm_stop))
        await writer.run_round(conn, warm)
        while warm.searches < 3 and not warm_task.done():
            await asyncio.sleep(0.1)
        warm_stop.set()
        await warm_task
        if warm.search_errors or warm.writer_errors:
            print(f"warm-up errors: {warm.error_samples}", file=sys.stderr, flush=True)
        print(
            f"{args.clients} clients ({args.mode}) + 1 writer for {args.minutes:g} min,"
            f" {windows} windows of {interval:g} s",
            flush=True,
        )
        tables_before = await table_mb(conn)
        t0 = time.monotonic()
        tasks = [
            asyncio.create_task(
                search_client(
                    url, queries, c * len(queries) // args.clients, args.mode, stats, stop
                )
            )
            for c in range(args.clients)
        ]
        tasks.append(asyncio.create_task(writer_loop(writer, conn, stats, stop, args.writer_pause)))
        hostile, clock = HostileStats(), PhaseClock(postgres_process(dsn))
        if args.hostile_phase:
            tasks.append(
                asyncio.create_task(
                    hostile_phases(url, stats, hostile, proc, clock, args.hostile_phase, stop)
                )
            )
        try:
            rows = await sampler(proc, conn, stats, stop, t0, interval, windows)
        finally:
            stop.set()
            _, pending = await asyncio.wait(tasks, timeout=STOP_GRACE_S)
            for t in pending:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        final_conns = await connections(conn)
        tables_after = await table_mb(conn)
    summary = summarise(rows, stats, args.baseline_window)
    extra: dict[str, Any] = {}
    if args.hostile_phase:
        extra["hostile"] = {
            **phase_report(stats.phase_latencies, clock),
            "client": hostile.summary(),
        }
    return {
        **extra,
        "interval_s": round(interval, 1),
        "windows": rows,
        "summary": summary,
        "warmup": {"searches": warm.searches, "errors": warm.search_errors + warm.writer_errors},
        "connections_after_clients_left": final_conns,
        "table_mb": {"before": tables_before, "after": tables_after},
        "error_samples": stats.error_samples,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--minutes", type=float, default=10.0, help="measured duration")
    ap.add_argument("--clients", type=int, default=10, help="concurrent MCP search sessions")
    ap.add_argument(
        "--interval",
        type=float,
        default=30.0,
        help=f"seconds per window (shortened to give at least {MIN_WINDOWS} windows)",
    )
    ap.add_argument("--mode", default="hybrid", choices=["hybrid", "semantic", "keyword"])
    ap.add_argument(
        "--baseline-window", type=int, default=2, help="window the drifts compare against"
    )
    ap.add_argument("--writer-files", type=int, default=24, help="files the writer keeps")
    ap.add_argument(
        "--writer-churn", type=int, default=2, help="files deleted, changed and added per round"
    )
    ap.add_argument("--writer-pause", type=float, default=1.0, help="seconds between rounds")
    ap.add_argument(
        "--dsn", default=None, help="admin DSN of a server (default: embedded in a temp dir)"
    )
    ap.add_argument(
        "--hostile-phase",
        type=float,
        default=0.0,
        help="seconds per phase: normal clients alone, with the hostile client, alone again, "
        "after a warm-up of half a phase (replaces --minutes and --interval; windows of half "
        "a phase)",
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "soak.json")
    args = ap.parse_args(argv)
    if args.hostile_phase:
        args.minutes = 3.5 * args.hostile_phase / 60
        args.interval = args.hostile_phase / 2

    data = load_set("scifact", "test")
    queries = list(data.queries.values())
    results: dict[str, Any] = {
        "set": "scifact",
        "documents": len(data.doc_ids),
        "queries": len(queries),
        "minutes": args.minutes,
        "clients": args.clients,
        "mode": args.mode,
        "hostile_phase_s": args.hostile_phase,
        "writer": {
            "collection": WRITE_COLLECTION,
            "model": WRITE_MODEL,
            "files": args.writer_files,
            "churn": args.writer_churn,
            "pause_s": args.writer_pause,
        },
        "pgrag_env": {k: v for k, v in os.environ.items() if k.startswith("PGRAG_")},
        "load_avg_before": list(os.getloadavg()),
    }
    tmp = Path(tempfile.mkdtemp(prefix="pgrag-soak-"))
    folder = tmp / "writer"
    folder.mkdir()
    log = tmp / "server.log"
    try:
        with server(args.dsn) as admin:
            dsn = fresh_database(admin, "pgrag_bench_soak")
            proc: subprocess.Popen[bytes] | None = None
            try:
                load_corpus(
                    dsn, data.titles, data.texts, data.vectors, data.doc_ids, collection=COLLECTION
                )
                port = free_port()
                proc = start_server(dsn, port, log)
                url = f"http://127.0.0.1:{port}/mcp"
                results.update(
                    asyncio.run(
                        soak(args, dsn, url, psutil.Process(proc.pid), queries, data.texts, folder)
                    )
                )
            finally:
                if proc is not None:
                    stop_server(proc)
                    results["server_exit_code"] = proc.returncode
                    results["server_log_problems"] = log_problems(log)
                drop_database(admin, dsn)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results["load_avg_after"] = list(os.getloadavg())
    print_summary(results["summary"])
    if "hostile" in results:
        print_phase_report(results["hostile"], results["hostile"]["client"])
    problems = results.get("server_log_problems", {"lines": 0})
    if problems["lines"]:
        print(f"server log: {problems['lines']} warning/error lines, see {args.out}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", flush=True)
    return 0 if all(results["summary"]["verdict"].values()) else 1


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:  # the second Ctrl-C: cleaned up on the way out, no report
        print("aborted", file=sys.stderr)
        raise SystemExit(130) from None
