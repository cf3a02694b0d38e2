"""Admission against a swarm (#38 High 4): one hostile key makes 30 parallel slow calls
while normal callers search. Run in one process, three phases of `--phase` seconds: the
normal callers alone (the baseline), with the swarm, alone again. Targets: no normal caller
ever gets a 429, and their throughput with the swarm stays within 30 % of the baseline.

Setup: a fresh database (the embedded cluster of benchmarks/support.py, or `--dsn`) holding
`--notes` generated text files (~12 KB each, no '#': the hostile regex `(.|..)+#|e`
backtracks through all of it until the regex budget ends it), ingested with the hash
embedder; `pgrag serve --transport http` with default admission settings
(PGRAG_SLOW_CALL_MS 500, PGRAG_CALLER_SLOW_SHARE 0.2, PGRAG_REGEX_TIMEOUT_MS 1000) and one
API key per normal client plus the hostile key.

Normal clients (`--clients`, each its own key) loop over keyword and hybrid searches and
document listings. The hostile key runs `--swarm` loops of the regex search; a refused call
(429) waits `--backoff` seconds before the next (a refusal costs the server little, but a
flood of them is a flood of requests, which a proxy's rate limit is for).

    python benchmarks/swarm.py [--phase 40] [--clients 10] [--swarm 30] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load import free_port
from support import RESULTS, drop_database, fresh_database, server

HASH = "hash/384"
HOSTILE_KEY = "swarm-hostile-key"
REGEX = "(.|..)+#|e"
WORDS = [
    "the",
    "contract",
    "renews",
    "every",
    "year",
    "unless",
    "either",
    "party",
    "sends",
    "notice",
    "before",
    "the",
    "term",
    "ends",
    "budget",
    "review",
    "quarterly",
    "revenue",
    "forecast",
    "warehouse",
    "shipment",
    "vendor",
    "invoice",
    "audit",
]
PHASES = ("baseline", "swarm", "after")


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in PHASES})
    statuses: dict[str, Counter[int]] = field(
        default_factory=lambda: {p: Counter() for p in PHASES}
    )
    hostile: Counter[int] = field(default_factory=Counter)
    phase: str = "baseline"


def write_notes(folder: Path, count: int) -> None:
    rng = random.Random(7)
    folder.mkdir(parents=True)
    for i in range(count):
        text = ". ".join(" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(180))
        (folder / f"note_{i:04d}.txt").write_text(text + ".", encoding="utf-8")


def pgrag(dsn: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "pgrag", "--database-url", dsn, "--embedding-model", HASH, *args]


def start(dsn: str, port: int, keys: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGRAG_")}
    env.update({"OMP_NUM_THREADS": "1", "PGRAG_API_KEYS": ",".join(keys)})
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            pgrag(dsn, "serve", "--transport", "http", "--port", str(port)),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=fh,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            ready = urllib.request.Request(
                f"http://127.0.0.1:{port}/readyz", headers={"Authorization": f"Bearer {keys[0]}"}
            )
            with urllib.request.urlopen(ready, timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"the server did not start: {log.read_text()[-2000:]}")


async def normal_client(base: str, key: str, tally: Tally, stop: asyncio.Event) -> None:
    rng = random.Random(key)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(base_url=base, headers=headers, timeout=120) as http:
        while not stop.is_set():
            kind = rng.choice(("keyword", "hybrid", "list"))
            words = " ".join(rng.sample(WORDS, 3))
            started, phase = time.perf_counter(), tally.phase
            if kind == "list":
                r = await http.get("/api/documents", params={"limit": "20"})
            else:
                r = await http.get("/api/search", params={"q": words, "mode": kind, "limit": "5"})
            tally.statuses[phase][r.status_code] += 1
            if r.status_code == 200 and phase == tally.phase:
                tally.latencies[phase].append(time.perf_counter() - started)


async def hostile_loop(base: str, backoff: float, tally: Tally, stop: asyncio.Event) -> None:
    headers = {"Authorization": f"Bearer {HOSTILE_KEY}"}
    async with httpx2.AsyncClient(base_url=base, headers=headers, timeout=120) as http:
        while not stop.is_set():
            r = await http.get("/api/search", params={"q": REGEX, "mode": "regex"})
            tally.hostile[r.status_code] += 1
            if r.status_code == 429:
                await asyncio.sleep(backoff)


def summary(tally: Tally, phase_s: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for phase in PHASES:
        lat = np.asarray(tally.latencies[phase]) * 1000
        out[phase] = {
            "answered": len(lat),
            "per_s": round(len(lat) / phase_s, 2),
            "p50_ms": round(float(np.percentile(lat, 50)), 1) if len(lat) else None,
            "p95_ms": round(float(np.percentile(lat, 95)), 1) if len(lat) else None,
            "statuses": dict(tally.statuses[phase]),
        }
    base = out["baseline"]
    for phase in ("swarm", "after"):
        out[phase]["throughput_ratio"] = round(out[phase]["per_s"] / base["per_s"], 3)
        if base["p95_ms"] and out[phase]["p95_ms"]:
            out[phase]["p95_ratio"] = round(out[phase]["p95_ms"] / base["p95_ms"], 3)
    refused = sum(out[p]["statuses"].get(429, 0) for p in PHASES)
    out["verdict"] = {
        "normal_429s": refused,
        "no_normal_429": refused == 0,
        "swarm_throughput_within_30pct": out["swarm"]["throughput_ratio"] >= 0.7,
    }
    out["hostile"] = dict(tally.hostile)
    return out


async def drive(base: str, keys: list[str], args: argparse.Namespace) -> dict[str, Any]:
    tally, stop, swarm_stop = Tally(), asyncio.Event(), asyncio.Event()
    clients = [asyncio.create_task(normal_client(base, k, tally, stop)) for k in keys]
    await asyncio.sleep(args.phase / 4)  # warm-up, not counted (but a 429 would show)
    warmup = dict(tally.statuses["baseline"])
    tally.latencies["baseline"].clear()
    tally.statuses["baseline"].clear()
    for phase in PHASES:
        tally.phase = phase
        swarm = []
        if phase == "swarm":
            swarm = [
                asyncio.create_task(hostile_loop(base, args.backoff, tally, swarm_stop))
                for _ in range(args.swarm)
            ]
        await asyncio.sleep(args.phase)
        if swarm:
            swarm_stop.set()
            await asyncio.gather(*swarm)
        print(f"{phase}: {len(tally.latencies[phase])} answered", flush=True)
    stop.set()
    await asyncio.gather(*clients)
    result = summary(tally, args.phase)
    result["warmup_statuses"] = warmup
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phase", type=float, default=40.0, help="seconds per phase")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--swarm", type=int, default=30, help="the hostile key's parallel calls")
    ap.add_argument("--backoff", type=float, default=0.25, help="hostile wait after a 429")
    ap.add_argument("--notes", type=int, default=200)
    ap.add_argument("--dsn", help="an admin DSN (default: the embedded cluster)")
    args = ap.parse_args(argv)
    keys = [f"swarm-normal-{i}" for i in range(args.clients)]
    with server(args.dsn) as admin, tempfile.TemporaryDirectory() as tmp:
        dsn = fresh_database(admin, "pgrag_swarm")
        try:
            write_notes(Path(tmp) / "notes", args.notes)
            done = subprocess.run(pgrag(dsn, "ingest", "-q", str(Path(tmp) / "notes")), check=False)
            assert done.returncode == 0
            port = free_port()
            proc = start(dsn, port, [*keys, HOSTILE_KEY], Path(tmp) / "server.log")
            try:
                result = asyncio.run(drive(f"http://127.0.0.1:{port}", keys, args))
            finally:
                proc.terminate()
                proc.wait(timeout=30)
        finally:
            drop_database(admin, dsn)
    result["settings"] = vars(args)
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "swarm.json").write_text(json.dumps(result, indent=2) + "\n")
    verdict = result["verdict"]
    return 0 if verdict["no_normal_429"] and verdict["swarm_throughput_within_30pct"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
