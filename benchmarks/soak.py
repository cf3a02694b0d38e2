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

    python benchmarks/soak.py [--minutes 10] [--clients 10] [--interval 30] [--dsn DSN]
    python benchmarks/soak.py --hostile-phase 90
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import numpy as np
import psutil
import psycopg
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_client import (
    HOSTILE_KEY,
    NORMAL_KEY,
    HostileStats,
    PhaseClock,
    bearer,
    hostile_phases,
    ingest_corpus,
    phase_report,
    postgres_process,
    print_phase_report,
    write_corpus,
)
from load import free_port
from support import RESULTS, drop_database, fresh_database, load_corpus, load_set, server

COLLECTION = "bench"
WRITE_COLLECTION = "soakwrite"
WRITE_MODEL = "hash/384"
SERVER_APP = "pgrag-soak-server"  # PGAPPNAME, so pg_stat_activity tells the sides apart
WRITER_APP = "pgrag-soak-writer"
MIN_WINDOWS = 6
TICK_S = 1.0  # RSS and connections are sampled this often; a row is printed per window
STOP_GRACE_S = 90.0

CONNECTIONS_SQL = (
    "SELECT coalesce(application_name, ''), count(*) FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    " AND backend_type = 'client backend' GROUP BY 1"  # not autovacuum workers
)
TABLES_SQL = (
    "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c"
    " JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = 'pgrag' AND c.relkind = 'r' ORDER BY 2 DESC LIMIT 6"
)
WRITTEN_SQL = (
    "SELECT d.path, d.content_hash, d.status FROM pgrag.documents d"
    " JOIN pgrag.collections c ON c.id = d.collection_id WHERE c.name = %s"
)


def percentiles_ms(seconds: list[float]) -> dict[str, float | None]:
    if not seconds:
        return {"p50": None, "p95": None}
    a = np.asarray(seconds) * 1000
    return {
        "p50": round(float(np.percentile(a, 50)), 1),
        "p95": round(float(np.percentile(a, 95)), 1),
    }


# -- shared counters ---------------------------------------------------------------------


@dataclass
class Window:
    """What happened between two samples; swapped out by the sampler."""

    latencies: list[float] = field(default_factory=list)
    search_errors: int = 0
    writer_errors: int = 0
    writer_rounds: int = 0


@dataclass
class Stats:
    window: Window = field(default_factory=Window)
    searches: int = 0
    search_errors: int = 0
    writer_errors: int = 0
    writer_rounds: int = 0
    files_written: int = 0  # added or changed files ingested and verified
    files_deleted: int = 0
    server_exited: bool = False
    error_samples: list[str] = field(default_factory=list)
    phase: str = "normal"  # with --hostile-phase: the phase a search finished in
    phase_latencies: dict[str, list[float]] = field(default_factory=dict)

    def search(self, seconds: float | None, error: str | None) -> None:
        """One search (`seconds` None: the session failed before a call was timed)."""
        self.searches += 1
        if seconds is not None:
            self.window.latencies.append(seconds)
            self.phase_latencies.setdefault(self.phase, []).append(seconds)
        if error:
            self.search_errors += 1
            self.window.search_errors += 1
            self._sample(f"search: {error}")

    def writer_error(self, error: str) -> None:
        self.writer_errors += 1
        self.window.writer_errors += 1
        self._sample(f"writer: {error}")

    def _sample(self, error: str) -> None:
        if len(self.error_samples) < 10:
            self.error_samples.append(error[:300])

    def take(self) -> Window:
        w, self.window = self.window, Window()
        return w


# -- the server --------------------------------------------------------------------------


def start_server(dsn: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    """`pgrag serve --transport http` in its own session (a terminal Ctrl-C stops the soak
    gracefully instead of killing the server under the clients), stderr to `log`."""
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PGRAG_COLLECTION": COLLECTION,
        "PGAPPNAME": SERVER_APP,
        "PGRAG_API_KEYS": f"{NORMAL_KEY},{HOSTILE_KEY}",
    }
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "pgrag", "--database-url", dsn),
                *("serve", "--transport", "http", "--port", str(port)),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=fh,
            start_new_session=True,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            ready = urllib.request.Request(
                f"http://127.0.0.1:{port}/readyz", headers=bearer(NORMAL_KEY)
            )
            with urllib.request.urlopen(ready, timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    stop_server(proc)
    raise RuntimeError(f"pgrag serve did not become ready, see {log}:\n{tail(log)}")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def log_problems(path: Path, limit: int = 20) -> dict[str, Any]:
    """Server log lines that look like trouble (the JSON keeps them next to the counts):
    an error the clients never saw, e.g. a failed audit write, still shows up here."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return {"lines": 0, "first": []}
    keys = ("WARNING", "ERROR", "Traceback", "CRITICAL", "Exception")
    hits = [ln[:300] for ln in text.splitlines() if any(k in ln for k in keys)]
    return {"lines": len(hits), "first": hits[:limit]}


def rss_bytes(proc: psutil.Process) -> int:
    """RSS of the server and every process it started (0: the server is gone)."""
    try:
        if proc.status() == psutil.STATUS_ZOMBIE:
            return 0
        total = proc.memory_info().rss
        children = proc.children(recursive=True)
    except psutil.Error:
        return 0
    for child in children:
        with contextlib.suppress(psutil.Error):
            total += child.memory_info().rss
    return total


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


class Writer:
    """Keeps `files` generated text files (2-6 KB of SciFact passages) in a folder: each
    round adds, changes and deletes a few, ingests the folder with the CLI and checks that
    the collection then holds exactly the folder's files, ready, with matching hashes."""

    def __init__(self, folder: Path, dsn: str, texts: list[str], files: int, churn: int) -> None:
        self.folder, self.dsn, self.texts = folder, dsn, texts
        self.rng = random.Random(8)
        self.files, self.churn = files, churn
        self.next_id = 0
        self.round = 0

    def _write(self, path: Path) -> None:
        size = self.rng.randint(2000, 6000)
        parts = [f"soak round {self.round} file {path.stem}"]
        while sum(len(p) for p in parts) < size:
            parts.append(self.rng.choice(self.texts))
        path.write_text("\n\n".join(parts), encoding="utf-8")

    def _new(self) -> None:
        self._write(self.folder / f"doc{self.next_id:05d}.txt")
        self.next_id += 1

    def mutate(self) -> tuple[int, int]:
        """(files added or changed, files deleted) for this round."""
        self.round += 1
        existing = sorted(self.folder.glob("*.txt"))
        if not existing:
            for _ in range(self.files):
                self._new()
            return self.files, 0
        doomed = self.rng.sample(existing, min(self.churn, len(existing)))
        for p in doomed:
            p.unlink()
        kept = [p for p in existing if p not in doomed]
        changed = self.rng.sample(kept, min(self.churn, len(kept)))
        for p in changed:
            self._write(p)
        for _ in range(len(doomed)):
            self._new()
        return len(changed) + len(doomed), len(doomed)

    async def ingest(self) -> str | None:
        """Run `pgrag ingest` on the folder; None or what went wrong."""
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PGAPPNAME": WRITER_APP}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "pgrag",
            "--database-url",
            self.dsn,
            "--embedding-model",
            WRITE_MODEL,
            "ingest",
            "-q",
            "-c",
            WRITE_COLLECTION,
            str(self.folder),
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        try:
            _, err = await asyncio.wait_for(proc.communicate(), timeout=300)
        finally:
            if proc.returncode is None:  # cancelled or timed out: do not leave it running
                proc.kill()
                await proc.wait()
        text = err.decode(errors="replace")
        if proc.returncode != 0:
            return f"ingest exit {proc.returncode}: {text[-300:]}"
        if "not ingested" in text:  # the CLI exits 0 when some files of the run succeeded
            return f"ingest reported failures: {text[text.index('not ingested') :][:300]}"
        return None

    async def verify(self, conn: psycopg.AsyncConnection) -> str | None:
        want = {
            p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in self.folder.glob("*.txt")
        }
        rows = await (await conn.execute(WRITTEN_SQL, (WRITE_COLLECTION,))).fetchall()
        have = {path: (digest, status) for path, digest, status in rows}
        wrong = sorted(n for n, d in want.items() if have.get(n) != (d, "ready")) + sorted(
            n for n in have if n not in want
        )
        if wrong:
            return f"{len(wrong)} documents differ from the folder after ingest, e.g. {wrong[:3]}"
        return None

    async def run_round(self, conn: psycopg.AsyncConnection, stats: Stats) -> None:
        written, deleted = self.mutate()
        error = await self.ingest() or await self.verify(conn)
        stats.writer_rounds += 1
        stats.window.writer_rounds += 1
        if error:
            stats.writer_error(f"round {self.round}: {error}")
        else:
            stats.files_written += written
            stats.files_deleted += deleted


async def writer_loop(
    writer: Writer, conn: psycopg.AsyncConnection, stats: Stats, stop: asyncio.Event, pause: float
) -> None:
    while not stop.is_set():
        try:
            await writer.run_round(conn, stats)
        except Exception as exc:  # a crashed round is an error
            stats.writer_error(f"round {writer.round}: {type(exc).__name__}: {exc}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=pause)


# -- sampling ----------------------------------------------------------------------------


async def table_mb(conn: psycopg.AsyncConnection) -> dict[str, float]:
    """The biggest pgrag tables with their indexes: what the database growth is made of."""
    rows = await (await conn.execute(TABLES_SQL)).fetchall()
    return {name: round(size / 2**20, 1) for name, size in rows}


async def connections(conn: psycopg.AsyncConnection) -> dict[str, int]:
    rows = await (await conn.execute(CONNECTIONS_SQL)).fetchall()
    out = {"server": 0, "writer": 0, "other": 0}
    for app, n in rows:
        key = {SERVER_APP: "server", WRITER_APP: "writer"}.get(app, "other")
        out[key] += n
    return out


HEADER = (
    f"{'win':>3} {'t_s':>6} {'searches':>8} {'qps':>6} {'s_err':>5} {'w_err':>5} {'p50_ms':>8}"
    f" {'p95_ms':>8} {'rss_mb':>7} {'conn_srv':>8} {'conn_all':>8} {'rounds':>6} {'written':>7}"
)


def fmt(value: float | None, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.1f}"


async def sampler(
    proc: psutil.Process,
    conn: psycopg.AsyncConnection,
    stats: Stats,
    stop: asyncio.Event,
    t0: float,
    interval: float,
    windows: int,
) -> list[dict[str, Any]]:
    """Every TICK_S: RSS and connections (their window maxima); every `interval`: a row."""
    rows: list[dict[str, Any]] = []
    print(HEADER, flush=True)
    rss_max = 0
    conn_max = {"server": 0, "writer": 0, "all": 0}
    for k in range(1, windows + 1):
        end = t0 + k * interval
        while (now := time.monotonic()) < end and not stop.is_set():
            rss = rss_bytes(proc)
            if not rss:
                stats.server_exited = True
                stats._sample("server: the process exited during the soak")
                stop.set()
                break
            rss_max = max(rss_max, rss)
            c = await connections(conn)
            conn_max = {
                "server": max(conn_max["server"], c["server"]),
                "writer": max(conn_max["writer"], c["writer"]),
                "all": max(conn_max["all"], sum(c.values())),
            }
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=min(TICK_S, max(0.0, end - now)))
        w = stats.take()
        rss = rss_bytes(proc)
        c = await connections(conn)
        db_mb = (
            await (await conn.execute("SELECT pg_database_size(current_database())")).fetchone()
        )[0]
        elapsed = time.monotonic() - t0
        span = elapsed - (k - 1) * interval
        row = {
            "window": k,
            "t_s": round(elapsed, 1),
            "partial": stop.is_set() and elapsed < k * interval - 1,
            "searches": len(w.latencies),
            "qps": round(len(w.latencies) / span, 2) if span > 0 else 0.0,
            "search_errors": w.search_errors,
            "writer_errors": w.writer_errors,
            "latency_ms": percentiles_ms(w.latencies),
            "rss_mb": round(rss / 2**20, 1),
            "rss_max_mb": round(max(rss_max, rss) / 2**20, 1),
            "connections": {**c, "all": sum(c.values())},
            "connections_max": {
                "server": max(conn_max["server"], c["server"]),
                "writer": max(conn_max["writer"], c["writer"]),
                "all": max(conn_max["all"], sum(c.values())),
            },
            "writer_rounds": stats.writer_rounds,
            "files_written": stats.files_written,
            "database_mb": round(db_mb / 2**20, 1),
        }
        rows.append(row)
        lat = row["latency_ms"]
        print(
            f"{k:>3} {row['t_s']:>6.0f} {row['searches']:>8} {row['qps']:>6.1f}"
            f" {w.search_errors:>5} {w.writer_errors:>5} {fmt(lat['p50'], 8)} {fmt(lat['p95'], 8)}"
            f" {row['rss_mb']:>7.1f} {row['connections_max']['server']:>8}"
            f" {row['connections_max']['all']:>8} {stats.writer_rounds:>6}"
            f" {stats.files_written:>7}" + ("  (partial)" if row["partial"] else ""),
            flush=True,
        )
        rss_max, conn_max = 0, {"server": 0, "writer": 0, "all": 0}
        if stop.is_set():
            break
    stop.set()
    return rows


def summarise(rows: list[dict[str, Any]], stats: Stats, baseline: int) -> dict[str, Any]:
    """Drift = last window against the baseline window (window 1 is warm-up by default:
    the pool opening, the query-vector cache filling, allocator arenas growing)."""
    full = [r for r in rows if not r["partial"]] or rows
    base = full[min(baseline, len(full)) - 1]
    last = full[-1]
    p95_base, p95_last = base["latency_ms"]["p95"], last["latency_ms"]["p95"]
    after = [r for r in full if r["window"] >= base["window"]]
    slope = None
    if len(after) >= 2:
        minutes = np.array([r["t_s"] for r in after]) / 60
        slope = round(float(np.polyfit(minutes, [r["rss_mb"] for r in after], 1)[0]), 2)
    rss_drift = (last["rss_mb"] - base["rss_mb"]) / base["rss_mb"]
    errors = stats.search_errors + stats.writer_errors + int(stats.server_exited)
    return {
        "searches": stats.searches,
        "search_errors": stats.search_errors,
        "writer_rounds": stats.writer_rounds,
        "writer_errors": stats.writer_errors,
        "files_written": stats.files_written,
        "files_deleted": stats.files_deleted,
        "server_exited": stats.server_exited,
        "errors": errors,
        "baseline_window": base["window"],
        "last_window": last["window"],
        "p95_ms_baseline": p95_base,
        "p95_ms_last": p95_last,
        "p95_drift": round(p95_last / p95_base, 3) if p95_base and p95_last else None,
        "rss_mb_baseline": base["rss_mb"],
        "rss_mb_last": last["rss_mb"],
        "rss_mb_peak": max(r["rss_max_mb"] for r in rows),
        "rss_drift": round(rss_drift, 4),
        "rss_slope_mb_per_min": slope,
        "connections_max": max(r["connections_max"]["all"] for r in rows),
        "server_connections_max": max(r["connections_max"]["server"] for r in rows),
        "server_connections_last": last["connections"]["server"],
        "verdict": {"zero_errors": errors == 0, "rss_growth_below_10pct": rss_drift < 0.10},
    }


def print_summary(s: dict[str, Any]) -> None:
    v = s["verdict"]
    print(
        f"\nsearches {s['searches']}, search errors {s['search_errors']}; writer rounds"
        f" {s['writer_rounds']} ({s['files_written']} files written, {s['files_deleted']}"
        f" deleted), writer errors {s['writer_errors']}\n"
        f"p95 drift {s['p95_drift']} (window {s['last_window']} {s['p95_ms_last']} ms /"
        f" baseline window {s['baseline_window']} {s['p95_ms_baseline']} ms)\n"
        f"RSS drift {s['rss_drift']:+.1%} ({s['rss_mb_baseline']} -> {s['rss_mb_last']} MB,"
        f" peak {s['rss_mb_peak']} MB, slope {s['rss_slope_mb_per_min']} MB/min after baseline)\n"
        f"open connections max {s['connections_max']} (server {s['server_connections_max']},"
        f" server at the end {s['server_connections_last']})\n"
        f"zero errors: {'PASS' if v['zero_errors'] else 'FAIL'}; RSS growth < 10 %:"
        f" {'PASS' if v['rss_growth_below_10pct'] else 'FAIL'}",
        flush=True,
    )


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
