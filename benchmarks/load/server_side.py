"""The load and soak benchmarks' server side: `pgrag serve` started and watched (its peak RSS,
its CPU and PostgreSQL's), a free port, latency percentiles."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import psutil

COLLECTION = "bench"


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0}
    arr = np.array(values)
    return {f"p{p}": round(float(np.percentile(arr, p)), 2) for p in (50, 95, 99)}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RssSampler(threading.Thread):
    """Peak RSS of the server process (and its children) sampled every 100 ms."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.proc = psutil.Process(pid)
        self.peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                rss = self.proc.memory_info().rss
                self.peak = max(self.peak, rss)
            except psutil.Error:
                return
            time.sleep(0.1)


def postgres_cpu_s() -> float:
    """CPU seconds of every `postgres` process on the machine (the benchmark's cluster, and
    any other: run on an otherwise idle box)."""
    total = 0.0
    for p in psutil.process_iter(["name"]):
        if (p.info["name"] or "").startswith("postgres"):
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += t.user + t.system
    return total


def cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def start_server(
    dsn: str, port: int, extra_env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PGRAG_COLLECTION": COLLECTION}
    env.update(extra_env or {})
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pgrag",
            "--database-url",
            dsn,
            "serve",
            "--transport",
            "http",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("pgrag serve did not become ready")
