"""The phases of a soak with a hostile client: normal clients alone, with the hostile client,
alone again, each phase's latency and CPU by side."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

from hostile_client import HostileStats, run_hostile

PHASES = ("warm-up", "normal", "hostile", "normal again")  # warm-up: half a phase, not compared


def cpu_seconds(proc: Any) -> float:
    """User + system CPU seconds of a psutil process and its children, live or reaped (0 once
    it is gone)."""
    try:
        t = proc.cpu_times()
        total = float(t.user + t.system + t.children_user + t.children_system)
        children = proc.children(recursive=True)
    except Exception:
        return 0.0
    for child in children:
        with contextlib.suppress(Exception):
            c = child.cpu_times()
            total += c.user + c.system
    return total


def postgres_process(dsn: str) -> Any:
    """The postmaster serving `dsn` when it listens on a Unix socket of this machine (the
    embedded cluster), else None."""
    import psutil
    from psycopg.conninfo import conninfo_to_dict

    host = str(conninfo_to_dict(dsn).get("host") or "")
    if not host.startswith("/"):
        return None
    for p in psutil.process_iter(["name", "cmdline"]):
        cmd = p.info["cmdline"] or []
        if p.info["name"] == "postgres" and "-k" in cmd and host in cmd:
            return p
    return None


@dataclass
class PhaseClock:
    """Where each phase starts: wall time, and CPU seconds of the pgrag server, of its
    PostgreSQL (when local), of this process (the clients) and of the whole machine (busy:
    all but idle and iowait)."""

    postgres: Any = None
    marks: list[tuple[str, float, float, float, float, float]] = field(default_factory=list)

    def mark(self, name: str, server: Any) -> None:
        import psutil

        own = os.times()
        box = psutil.cpu_times()
        busy = sum(box) - box.idle - getattr(box, "iowait", 0.0)
        pg = cpu_seconds(self.postgres) if self.postgres is not None else 0.0
        self.marks.append(
            (name, time.monotonic(), cpu_seconds(server), pg, own.user + own.system, busy)
        )


async def hostile_phases(
    url: str,
    stats: Any,
    hostile: HostileStats,
    server: Any,
    clock: PhaseClock,
    phase_s: float,
    stop: asyncio.Event,
) -> None:
    """Normal clients alone (after a warm-up: the pool opening, caches filling), then with
    the hostile client, then alone again; `stats.phase` labels each normal search with the
    phase it finished in."""
    hostile_stop = asyncio.Event()
    task: asyncio.Task[None] | None = None
    for name in PHASES:
        stats.phase = name
        clock.mark(name, server)
        if name == "hostile":
            task = asyncio.create_task(run_hostile(url, hostile, hostile_stop))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=phase_s / (2 if name == "warm-up" else 1))
        if task is not None:
            hostile_stop.set()
            await task
            task = None
        if stop.is_set():
            break
    clock.mark("end", server)
    stop.set()


def phase_report(latencies: dict[str, list[float]], clock: PhaseClock) -> dict[str, Any]:
    """Per phase: the normal clients' p50/p95 and the CPU the server and this process used
    (cores); the hostile phase's p95 against the pooled normal phases'."""
    import numpy as np

    def pct(values: list[float], q: float) -> float | None:
        return round(float(np.percentile(np.asarray(values) * 1000, q)), 1) if values else None

    phases: dict[str, Any] = {}
    for (name, t, server, pg, own, box), (_, t2, server2, pg2, own2, box2) in zip(
        clock.marks, clock.marks[1:], strict=False
    ):
        span = max(t2 - t, 1e-9)
        values = latencies.get(name, [])
        phases[name] = {
            "seconds": round(span, 1),
            "searches": len(values),
            "qps": round(len(values) / span, 2),
            "p50_ms": pct(values, 50),
            "p95_ms": pct(values, 95),
            "server_cores": round((server2 - server) / span, 2),
            "postgres_cores": round((pg2 - pg) / span, 2),
            "clients_cores": round((own2 - own) / span, 2),
            "machine_busy_cores": round((box2 - box) / span, 2),
        }
    normal = latencies.get("normal", []) + latencies.get("normal again", [])
    hostile = latencies.get("hostile", [])
    base95, host95 = pct(normal, 95), pct(hostile, 95)
    base50, host50 = pct(normal, 50), pct(hostile, 50)
    return {
        "phases": phases,
        "normal_pooled": {"p50_ms": base50, "p95_ms": base95},
        "p95_ratio": round(host95 / base95, 3) if host95 and base95 else None,
        "p50_ratio": round(host50 / base50, 3) if host50 and base50 else None,
        "load_avg": list(os.getloadavg()),
    }


def print_phase_report(report: dict[str, Any], hostile: dict[str, Any]) -> None:
    print("\nnormal clients with and without the hostile client (same run):", flush=True)
    print(
        f"{'phase':<13} {'s':>5} {'searches':>8} {'qps':>6} {'p50_ms':>8} {'p95_ms':>8}"
        f" {'server_cores':>12} {'postgres_cores':>14} {'clients_cores':>13}"
        f" {'machine_busy':>12}"
    )
    for name, p in report["phases"].items():
        print(
            f"{name:<13} {p['seconds']:>5.0f} {p['searches']:>8} {p['qps']:>6.1f}"
            f" {p['p50_ms'] or 0:>8.1f} {p['p95_ms'] or 0:>8.1f} {p['server_cores']:>12.2f}"
            f" {p['postgres_cores']:>14.2f}"
            f" {p['clients_cores']:>13.2f} {p['machine_busy_cores']:>12.2f}"
        )
    print(
        f"p95 with hostile / without: {report['p95_ratio']} (bar: <= 1.2); p50:"
        f" {report['p50_ratio']}\nhostile calls: {hostile['calls']}, mean ms"
        f" {hostile['mean_ms']}, unexpected outcomes: {len(hostile['unexpected'])}",
        flush=True,
    )
