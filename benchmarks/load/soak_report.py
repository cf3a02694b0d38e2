"""What the soak samples and reports: latency windows, the server's RSS, PostgreSQL's
connections and table sizes, and the summary against the baseline window."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psutil
import psycopg
from soak_server import SERVER_APP, WRITER_APP, rss_bytes

TICK_S = 1.0  # RSS and connections are sampled this often; a row is printed per window


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


def percentiles_ms(seconds: list[float]) -> dict[str, float | None]:
    if not seconds:
        return {"p50": None, "p95": None}
    a = np.asarray(seconds) * 1000
    return {
        "p50": round(float(np.percentile(a, 50)), 1),
        "p95": round(float(np.percentile(a, 95)), 1),
    }


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
