"""The soak's server: `pgrag serve` started in its own session and stopped, its log read for
problems, its RSS; the application names that tell the sides apart in pg_stat_activity."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil
from hostile_client import (
    HOSTILE_KEY,
    NORMAL_KEY,
    bearer,
)

COLLECTION = "bench"


SERVER_APP = "pgrag-soak-server"  # PGAPPNAME, so pg_stat_activity tells the sides apart


WRITER_APP = "pgrag-soak-writer"


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
