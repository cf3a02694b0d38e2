"""How long a change takes to reach the MCP clients of two `pgrag serve` processes, on one
PostgreSQL (embedded) and on a local Citus cluster (docs/scale-out.md).

Two `pgrag serve --transport http` processes against one database, an SDK client on each
listening with `subscriptions/listen`; a note is saved in this process (the write
toolset's service) REPEAT times, and the time from its commit until both clients have the
`resources/list_changed` event is recorded. The relay's 0.5 s debounce is part of it.
Builds Citus the first time like the tests do (cached). About 2 minutes on 2 cores.

    python benchmarks/cluster/notify_latency.py
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx2
import psycopg
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository: tests.support

from pgrag.db.database import open_database, prepare
from pgrag.db.embedded import start_embedded
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.services.saved import NewDocument, SavedDocuments
from pgrag.settings import load_settings
from tests.conftest import with_dbname
from tests.support.citus import citus_cluster, fresh_database, migrate
from tests.support.kb_server import http_server
from tests.support.two_servers import MODEL, WRITABLE

REPEAT = 8


async def measure(url: str) -> list[float]:
    """Seconds from each commit until both processes' clients were told."""
    out: list[float] = []
    with (
        http_server(url, *MODEL, env=WRITABLE) as a,
        http_server(url, *MODEL, env=WRITABLE) as b,
    ):
        async with contextlib.AsyncExitStack() as stack:
            stamps: dict[str, list[float]] = {"A": [], "B": []}
            for name, server in (("A", a), ("B", b)):
                hc = await stack.enter_async_context(
                    httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=120))
                )
                client = await stack.enter_async_context(
                    Client(streamable_http_client(server.mcp_url, http_client=hc))
                )
                sub = await stack.enter_async_context(client.listen(resources_list_changed=True))

                async def collect(sub: object = sub, into: list[float] = stamps[name]) -> None:
                    async for _ in sub:  # type: ignore[attr-defined]
                        into.append(time.perf_counter())

                task = asyncio.create_task(collect())
                stack.callback(task.cancel)
            async with open_database(load_settings(), dsn=url, max_size=2) as db:
                saved = SavedDocuments(db.pool, HashEmbedder("hash/384"), load_settings(), None)
                for i in range(REPEAT):
                    before = {k: len(v) for k, v in stamps.items()}
                    await saved.create(NewDocument(content=f"# n{i}\n\nnote {i}", topic=f"t{i}"))
                    t0 = time.perf_counter()
                    while any(len(stamps[k]) <= before[k] for k in stamps):
                        await asyncio.sleep(0.01)
                    out.append(max(stamps[k][before[k]] for k in stamps) - t0)
    return out


def report(name: str, seconds: list[float]) -> None:
    ms = sorted(s * 1000 for s in seconds)
    print(f"{name:14} median {statistics.median(ms):5.0f} ms   max {ms[-1]:5.0f} ms   n={len(ms)}")


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="pgrag-notify-"))
    try:
        server = start_embedded(tmp / "pg", cleanup_mode="delete")
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute("CREATE DATABASE notify_latency")
        url = with_dbname(server, "notify_latency")
        asyncio.run(prepare(url))
        report("one server", asyncio.run(measure(url)))
        with citus_cluster(2) as cluster:
            url = fresh_database(cluster)
            asyncio.run(migrate(url, True))
            report("citus", asyncio.run(measure(url)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
