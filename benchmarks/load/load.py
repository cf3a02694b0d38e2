"""Load benchmark: N concurrent MCP clients searching over Streamable HTTP.

Loads SciFact (precomputed passage vectors, see benchmarks/support.py) into a fresh
database, starts `pgrag serve --transport http` as a subprocess, and drives 10 and 50
concurrent clients through a fixed number of hybrid `search` calls. Per client count:
- sdk, cold: the official Python MCP client (each its own session); every query is new to
  the server (SciFact's 1,109 queries, taken in order), so each search pays a model call
  (~40 ms CPU for the bundled model);
- sdk, warm: the same queries again, answered from the in-process query-vector cache, as
  repeated questions, retries and continuation pages are;
- light, warm: the same calls from a client reduced to the protocol (JSON-RPC posts), which
  costs ~2-3 ms CPU per search instead of the SDK client's ~5: on a 2-core box the clients
  share the server's cores, and this is closer to clients running elsewhere;
- light, paced, cold then warm: the clients together offer --rate searches/s (each calls
  every clients / rate seconds, starts spread out), on queries of their own: latency at a
  stated load, not a closed loop. Agents pause for a model turn between calls; closed-loop
  cold searches cannot meet 150 ms here (10 model calls of ~35 ms CPU on 2 cores take
  175 ms before anything else runs), paced ones show the latency an agent sees.
Every run is a fixed number of searches (--searches, shared by its clients). Clients
connect first as agents do (initialize, tools/list; the official client also makes its
first call, reported apart: it compiles a schema validator) and then all start at once:
latency, wall time and CPU cover the searches only (connecting is once per session).
Every run is closed-loop unless paced: with N clients, latency = N / throughput once the
machine is saturated. Prints throughput, p50/p95/p99 latency, errors, CPU per search by side
(server, clients, PostgreSQL) and the server's peak RSS; in the same run it measures the same
queries in process (SearchService, no transport), cold and warm, so the transport overhead
is a ratio. Targets: 10 clients p95 <= 150 ms, zero errors, RSS <= 500 MB.

    python benchmarks/load/load.py [--clients 10,50] [--searches 250] [--rate 20] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import psutil
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: support.py
from server_side import (
    COLLECTION,
    RssSampler,
    cpu_s,
    free_port,
    percentiles,
    postgres_cpu_s,
    start_server,
)
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

CpuSample = Callable[[], tuple[float, float, float]]


def measured(
    url: str,
    work: list[list[str]],
    server: psutil.Process,
    client: str = "sdk",
    interval_s: float = 0.0,
) -> dict[str, Any]:
    """One run, with the CPU its searches cost in the server, in this process (the MCP
    clients) and in PostgreSQL: where two cores go."""
    me = psutil.Process()
    return asyncio.run(
        drive(url, work, client, interval_s, lambda: (cpu_s(server), cpu_s(me), postgres_cpu_s()))
    )


async def one_client(
    url: str,
    queries: list[str],
    latencies: list[float],
    errors: list[str],
    start: asyncio.Barrier,
    first_calls: list[float],
) -> None:
    """The official client: connects as an agent does (initialize, tools/list, which also
    gives it the output schemas it validates results against) and makes a first call,
    which compiles the client's validator for `search` (a one-off per session, reported
    as first_call_ms), then waits for the others so that every timed call is a search."""
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(60)) as hc,
        streamable_http_client(url, http_client=hc) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await session.list_tools()
        t = time.perf_counter()
        await session.call_tool("search", {"query": "first call", "content_mode": "none"})
        first_calls.append((time.perf_counter() - t) * 1000)
        await start.wait()
        for q in queries:
            t = time.perf_counter()
            try:
                r = await session.call_tool(
                    "search", {"query": q, "limit": 10, "content_mode": "none"}
                )
                if r.is_error:
                    errors.append(str(r.structured_content)[:200])
            except Exception as exc:  # a transport failure is an error, not a crash
                errors.append(f"{type(exc).__name__}: {exc}"[:200])
            latencies.append((time.perf_counter() - t) * 1000)


LIGHT_HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",  # one the SDK server accepts
}


async def light_client(
    url: str,
    queries: list[str],
    latencies: list[float],
    errors: list[str],
    start: asyncio.Barrier,
    interval_s: float = 0.0,
    offset_s: float = 0.0,
) -> None:
    """An MCP client reduced to the protocol: initialize, then JSON-RPC tools/call posts,
    each answered with one JSON body (Streamable HTTP, stateless). What the server does is
    the same as for the SDK client; the client side costs ~2-3 ms CPU per search instead of
    ~5 (no output-schema validation, no session task group), which matters when clients
    share the server's two cores. With `interval_s`, a call starts every interval_s seconds
    (or at once when the previous one was slower), the first after offset_s: an agent's
    pace, not a closed loop."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": LIGHT_HEADERS["mcp-protocol-version"],
            "capabilities": {},
            "clientInfo": {"name": "pgrag-load", "version": "1"},
        },
    }
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(60)) as hc:
        (await hc.post(url, json=init, headers=LIGHT_HEADERS)).raise_for_status()
        listing = {"jsonrpc": "2.0", "id": 0, "method": "tools/list"}
        (await hc.post(url, json=listing, headers=LIGHT_HEADERS)).raise_for_status()
        await start.wait()
        next_at = time.perf_counter() + offset_s
        for i, q in enumerate(queries, 1):
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            t = time.perf_counter()
            next_at = t + interval_s
            call = {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {
                    "name": "search",
                    "arguments": {"query": q, "limit": 10, "content_mode": "none"},
                },
            }
            try:
                r = await hc.post(url, json=call, headers=LIGHT_HEADERS)
                result = r.json().get("result") or {}
                if (
                    r.status_code != 200
                    or result.get("isError")
                    or "structuredContent" not in result
                ):
                    errors.append(r.text[:200])
            except Exception as exc:  # a transport failure is an error, not a crash
                errors.append(f"{type(exc).__name__}: {exc}"[:200])
            latencies.append((time.perf_counter() - t) * 1000)


def split_work(queries: list[str], start: int, clients: int, per_client: int) -> list[list[str]]:
    """Consecutive queries from `start` (wrapping), `per_client` for each client."""
    return [
        [queries[(start + c * per_client + i) % len(queries)] for i in range(per_client)]
        for c in range(clients)
    ]


async def drive(
    url: str,
    work: list[list[str]],
    client: str = "sdk",
    interval_s: float = 0.0,
    cpu: CpuSample | None = None,
) -> dict[str, Any]:
    """Every client connects, then all start searching at once; wall time and CPU cover
    the searches only."""
    latencies: list[float] = []
    errors: list[str] = []
    first_calls: list[float] = []
    start = asyncio.Barrier(len(work) + 1)
    if client == "sdk":
        runs = [one_client(url, w, latencies, errors, start, first_calls) for w in work]
    else:
        # paced clients start spread over one interval, not all at the same instant
        runs = [
            light_client(url, w, latencies, errors, start, interval_s, interval_s * i / len(work))
            for i, w in enumerate(work)
        ]
    connecting = time.perf_counter()
    tasks = [asyncio.create_task(r) for r in runs]
    ready = asyncio.create_task(start.wait())
    await asyncio.wait([ready, *tasks], return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():  # a client failed to connect: stop the others, raise its error
        await start.abort()
        await asyncio.gather(*tasks)
    t = time.perf_counter()
    before = cpu() if cpu else None
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - t
    used = {}
    if cpu and before:
        used = {
            side: round((a - b) / max(len(latencies), 1) * 1000, 1)
            for side, a, b in zip(("server", "clients", "postgres"), cpu(), before, strict=True)
        }
    return {
        "client": client,
        "clients": len(work),
        "searches": len(latencies),
        "connect_s": round(t - connecting, 2),  # every client's session set up, together
        "wall_s": round(wall, 2),
        "throughput_qps": round(len(latencies) / wall, 2),
        "errors": len(errors),
        "error_samples": errors[:3],
        "latency_ms": percentiles(latencies),
        **({"first_call_ms": percentiles(first_calls)} if first_calls else {}),
        **({"cpu_ms_per_search": used} if used else {}),
    }


async def in_process(dsn: str, queries: list[str]) -> dict[str, Any]:
    """The same searches without any transport (the floor the HTTP numbers compare to),
    one at a time: first cold (model call each), then warm (query-vector cache)."""
    from pgrag.db.database import open_database
    from pgrag.embeddings.registry import make_provider
    from pgrag.search.engine import SearchService
    from pgrag.search.models import SearchRequest
    from pgrag.settings import load_settings

    settings = load_settings()
    provider = make_provider(settings)
    out: dict[str, Any] = {"searches": len(queries)}
    async with open_database(settings, dsn=dsn) as db:
        service = SearchService(db.pool, provider)
        await service.search(SearchRequest(query="warm up", limit=10))
        for phase in ("cold", "warm"):
            times: list[float] = []
            for q in queries:
                t = time.perf_counter()
                await service.search(SearchRequest(query=q, limit=10, content_mode="none"))
                times.append((time.perf_counter() - t) * 1000)
            out[phase] = {"latency_ms": percentiles(times)}
    await provider.aclose()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--clients", default="10,50", help="comma list of concurrent client counts")
    ap.add_argument(
        "--searches", type=int, default=250, help="searches per run, shared by its clients"
    )
    ap.add_argument(
        "--rate",
        type=float,
        default=20.0,
        help="searches/s all light clients offer together in the paced run (0: no paced run)",
    )
    ap.add_argument(
        "--dsn", default=None, help="admin DSN of a server (default: embedded in a temp dir)"
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "load.json")
    args = ap.parse_args(argv)

    data = load_set("scifact", "test")
    queries = list(beir_io.load_queries(str(DATA / "scifact")).values())  # all 1,109
    results: dict[str, Any] = {"set": "scifact", "documents": len(data.doc_ids), "runs": []}
    with server(args.dsn) as admin:
        dsn = fresh_database(admin, "pgrag_bench_load")
        try:
            load_corpus(
                dsn, data.titles, data.texts, data.vectors, data.doc_ids, collection=COLLECTION
            )
            results["in_process"] = asyncio.run(in_process(dsn, queries[-100:]))
            port = free_port()
            proc = start_server(dsn, port)
            sampler = RssSampler(proc.pid)
            ps = psutil.Process(proc.pid)
            sampler.start()
            try:
                url = f"http://127.0.0.1:{port}/mcp"
                # warm-up (model loaded, pool filled) on queries no measured run uses
                asyncio.run(drive(url, split_work(queries, len(queries) - 6, 2, 3)))
                seen = {q for w in split_work(queries, len(queries) - 6, 2, 3) for q in w}
                start = 0
                for n in [int(c) for c in args.clients.split(",") if c.strip()]:
                    per_client = -(-args.searches // n)
                    closed = split_work(queries, start, n, per_client)
                    paced = split_work(queries, start + n * per_client, n, per_client)
                    start += 2 * n * per_client
                    phases = [
                        ("cold", "sdk", 0.0, closed),
                        ("warm", "sdk", 0.0, closed),
                        ("warm", "light", 0.0, closed),
                    ]
                    if args.rate > 0:  # each client calls every n / rate seconds
                        pace_s = n / args.rate
                        phases += [
                            ("cold", "light", pace_s, paced),
                            ("warm", "light", pace_s, paced),
                        ]
                    for phase, client, pace, work in phases:
                        asked = [q for w in work for q in w]
                        new = sum(1 for q in set(asked) if q not in seen)
                        seen.update(asked)
                        run = {
                            "phase": phase,
                            "new_queries": new,
                            "pace_s": pace,
                            **measured(url, work, ps, client, pace),
                        }
                        base = results["in_process"][phase]["latency_ms"]["p95"] or 1
                        run["p95_vs_in_process"] = round(run["latency_ms"]["p95"] / base, 2)
                        results["runs"].append(run)
                        print(json.dumps(run), flush=True)
            finally:
                sampler.stop.set()
                proc.terminate()
                proc.wait(timeout=30)
            results["server_peak_rss_mb"] = round(sampler.peak / 2**20, 1)
        finally:
            drop_database(admin, dsn)
    results["load_avg_after"] = list(os.getloadavg())
    print(json.dumps(results, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
