"""What the soak's hostile phase does to the server's memory, call kind by call kind.

    python benchmarks/hostile_memory.py [--rounds 6] [--trace] [--arena-max N]
        [--dsn DSN] [--out benchmarks/results/hostile-memory.json]

A fresh database holds the hostile client's corpus (hostile_client.py: the 1 × 16,384-column
CSV and the 3 MB text, hash embedder) and one note embedded with the default model (so
searches embed their query as the soak's do). `pgrag serve --transport http` runs under
memory_hook.py; one MCP session sends short searches (the soak's normal load), then
`--rounds` calls of each hostile kind in turn, then three times `--rounds` mixed rounds
(every kind in turn). After each step the server reports its RSS, glibc's bytes in use and
free-but-kept, its arenas, and (`--trace`) the Python bytes traced and the source lines
that grew most; at the end glibc is trimmed (`malloc_trim(0)`) and the RSS read again.
`--arena-max` sets MALLOC_ARENA_MAX for the server. Findings: benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
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
from pathlib import Path
from typing import Any

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_client import (
    SESSION_KINDS,
    HostileClient,
    HostileStats,
    ingest_corpus,
    write_corpus,
)
from load import free_port
from support import RESULTS, drop_database, fresh_database, server

HOOK = Path(__file__).resolve().parent / "memory_hook.py"
NOTE_COLLECTION = "probe"
NORMAL_CALLS = 30
AGAIN = 3
WORDS = ("budget", "forecast", "contract", "revenue", "vendor", "audit", "policy", "quarter")


def start(dsn: str, port: int, log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, str(HOOK), "--database-url", dsn]
    cmd += ["serve", "--transport", "http", "--port", str(port)]
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, env={**os.environ, **env}, stdout=fh, stderr=fh)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2):
                return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"the server did not start:\n{log.read_text()[-2000:]}")


class Reports:
    """Asks the server for a report and waits for its line."""

    def __init__(self, pid: int, path: Path) -> None:
        self.pid, self.path = pid, path
        self.rows: list[dict[str, Any]] = []

    async def take(self, step: str, *, trim: bool = False) -> None:
        os.kill(self.pid, signal.SIGUSR2 if trim else signal.SIGUSR1)
        for _ in range(600):
            lines = self.path.read_text().splitlines() if self.path.exists() else []
            if len(lines) > len(self.rows):
                row = {"step": step, **json.loads(lines[-1])}
                self.rows.append(row)
                extra = f" → {row['rss_after_trim_mb']} MB trimmed" if trim else ""
                print(
                    f"{step:<12} rss {row['rss_mb']:>7} MB{extra}  glibc in use"
                    f" {row['glibc_in_use_mb']:>6} free kept {row['glibc_free_kept_mb']:>6}"
                    f" arenas {row['glibc_arenas']:>2}"
                    f"  python {row.get('python_traced_mb', '-')}",
                    flush=True,
                )
                for line in row.get("top_growth", [])[:5]:
                    print("   ", line, flush=True)
                return
            await asyncio.sleep(0.1)
        raise RuntimeError("the server wrote no report")


async def probe(url: str, reports: Reports, rounds: int) -> dict[str, Any]:
    stats = HostileStats()
    client = HostileClient(url, stats)
    rng = random.Random(7)
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(120)) as hc,
        streamable_http_client(url, http_client=hc) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for step in ("warm-up", "normal"):
            for _ in range(NORMAL_CALLS):
                query = " ".join(rng.sample(WORDS, 3))
                await session.call_tool("search", {"query": query, "limit": 10})
            await reports.take(step)
        for kind in SESSION_KINDS:
            for _ in range(rounds):
                await client.call(session, kind)
            await reports.take(kind)
        for _ in range(rounds):
            await client.raw_calls(hc)
        await reports.take("raw_posts")
        for again in range(1, AGAIN + 1):  # mixed rounds: does anything keep growing?
            for _ in range(rounds):
                for kind in SESSION_KINDS:
                    await client.call(session, kind)
            await reports.take(f"mixed {again}")
        await asyncio.sleep(5)
        await reports.take("idle", trim=True)
    return stats.summary()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--trace", action="store_true", help="tracemalloc in the server")
    parser.add_argument("--arena-max", type=int, default=0, help="MALLOC_ARENA_MAX (0: unset)")
    parser.add_argument("--dsn", default=None)
    parser.add_argument("--out", type=Path, default=RESULTS / "hostile-memory.json")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pgrag-memory-"))
    try:
        write_corpus(tmp / "hostile")
        (tmp / "note").mkdir()
        (tmp / "note" / "note.txt").write_text(
            "The quarterly budget forecast for the vendor audit."
        )
        report_path, log = tmp / "memory.jsonl", tmp / "server.log"
        env = {"MEMORY_REPORT": str(report_path), "PGRAG_COLLECTION": NOTE_COLLECTION}
        env |= {"MEMORY_TRACE": "1"} if args.trace else {}
        env |= {"MALLOC_ARENA_MAX": str(args.arena_max)} if args.arena_max else {}
        with server(args.dsn) as admin:
            dsn = fresh_database(admin, "pgrag_bench_memory")
            proc: subprocess.Popen[bytes] | None = None
            try:
                asyncio.run(ingest_corpus(dsn, tmp / "hostile"))
                note = [sys.executable, "-m", "pgrag", "--database-url", dsn, "ingest", "-q"]
                subprocess.run([*note, "-c", NOTE_COLLECTION, str(tmp / "note")], check=True)
                port = free_port()
                proc = start(dsn, port, log, env)
                reports = Reports(proc.pid, report_path)
                url = f"http://127.0.0.1:{port}/mcp"
                calls = asyncio.run(probe(url, reports, args.rounds))
            finally:
                if proc is not None:
                    proc.terminate()
                    proc.wait(timeout=60)
                drop_database(admin, dsn)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result = {"args": {k: str(v) for k, v in vars(args).items()}, "steps": reports.rows}
    result["hostile_calls"] = calls
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
