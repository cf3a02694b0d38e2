"""Two `pgrag serve --transport http` processes against one database, each with an MCP
client (the SDK's, over Streamable HTTP, listening with `subscriptions/listen`): both serve
the same data, and a change made through either process or the CLI reaches both clients.
Shared by tests/test_two_servers.py (one PostgreSQL) and tests/test_citus_notify.py."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ResourcesListChanged, Subscription

from tests.support.commands import pgrag_cmd
from tests.support.kb_server import HttpServer, child_env, http_server
from tests.support.notify import wait_for

MODEL = ["--embedding-model", "hash/384"]
WRITABLE = {"PGRAG_READ_ONLY": "false", "PGRAG_TOOLSETS": "core,write"}


async def _collect(sub: Subscription, into: list[Any]) -> None:
    async for event in sub:
        into.append(event)


async def _listed(client: Client) -> set[tuple[str, str]]:
    """Every resource the server lists (all pages): URI and name."""
    uris: set[tuple[str, str]] = set()
    cursor = None
    while True:
        page = await client.list_resources(cursor=cursor)
        uris.update((str(r.uri), r.name) for r in page.resources)
        cursor = page.next_cursor
        if not cursor:
            return uris


async def _hits(client: Client, query: str) -> list[tuple[str, float]]:
    result = await client.call_tool("search", {"query": query, "mode": "keyword", "limit": 10})
    assert not result.is_error, result
    data = (result.structured_content or {})["data"]
    return [(h["path"], h["score"]) for h in data["results"]]


async def _until_ready(server: HttpServer, document_id: str, timeout: float = 60.0) -> bool:
    async with httpx2.AsyncClient(timeout=30) as hc:
        for _ in range(int(timeout * 10)):
            r = await hc.get(f"{server.base}/api/documents/{document_id}")
            if r.status_code == 200 and r.json().get("status") == "ready":
                return True
            await asyncio.sleep(0.1)
    return False


async def settled(events: dict[str, list[Any]], quiet_s: float = 2.0) -> None:
    """Wait until no client has been told anything for `quiet_s` (the relay debounces 0.5 s)."""
    counts = {n: len(e) for n, e in events.items()}
    while True:
        await asyncio.sleep(quiet_s)
        now = {n: len(e) for n, e in events.items()}
        if now == counts:
            return
        counts = now


async def two_servers_relay_every_change(url: str, tmp: Path) -> None:
    folder = tmp / "notes"
    folder.mkdir()
    (folder / "zebra.md").write_text("# Zebras\n\nzebras live in Africa.\n", encoding="utf-8")
    (folder / "okapi.md").write_text("# Okapis\n\nokapis hide in the forest.\n", encoding="utf-8")
    ingest = pgrag_cmd("--database-url", url, *MODEL, "ingest", "-q", "-c", "notes", str(folder))
    with (
        http_server(url, *MODEL, env=WRITABLE, log_path=tmp / "a.log") as a,
        http_server(url, *MODEL, env=WRITABLE, log_path=tmp / "b.log") as b,
    ):
        servers: dict[str, HttpServer] = {"A": a, "B": b}
        events: dict[str, list[Any]] = {"A": [], "B": []}
        clients: dict[str, Client] = {}
        async with contextlib.AsyncExitStack() as stack:
            for name, server in servers.items():
                hc = await stack.enter_async_context(
                    httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=120))
                )
                client = await stack.enter_async_context(
                    Client(streamable_http_client(server.mcp_url, http_client=hc))
                )
                sub = await stack.enter_async_context(client.listen(resources_list_changed=True))
                assert sub.honored.resources_list_changed, sub.honored
                task = asyncio.create_task(_collect(sub, events[name]))
                stack.callback(task.cancel)
                clients[name] = client

            async def both_told(change: Any) -> None:
                """Make the change; both clients get a resources list_changed for it."""
                before = {n: len(e) for n, e in events.items()}
                await change()
                for n, e in events.items():
                    arrived = await wait_for(lambda e=e, n=n: len(e) > before[n])
                    logs = {x: (tmp / f"{x.lower()}.log").read_text()[-3000:] for x in servers}
                    assert arrived, f"the client of {n} was not told: {events}; logs: {logs}"
                    assert all(isinstance(x, ResourcesListChanged) for x in e), e
                # a change may come in bursts (two files finishing apart), each announced:
                # the next change counts from the last of them, not from one still to come
                await settled(events)

            # 1. the CLI ingests two files: both processes relay it and list them
            async def cli_ingest() -> None:
                done = await asyncio.to_thread(
                    subprocess.run, ingest, capture_output=True, text=True, timeout=300,
                    env=child_env(),
                )  # fmt: skip
                assert done.returncode == 0, done.stderr

            await both_told(cli_ingest)
            listed = {n: await _listed(c) for n, c in clients.items()}
            assert listed["A"] == listed["B"]
            assert {"zebra.md", "okapi.md"} <= {name for _, name in listed["A"]}, listed
            zebras = {n: await _hits(c, "zebras") for n, c in clients.items()}
            assert zebras["A"] == zebras["B"] and zebras["A"][0][0] == "zebra.md", zebras

            # 2. a note saved through process A (the write toolset): B's client is told too
            saved: dict[str, Any] = {}

            async def save_through_a() -> None:
                result = await clients["A"].call_tool(
                    "save_document",
                    {"content": "# Heron\n\nherons wade at dawn.", "topic": "heron"},
                )
                assert not result.is_error, result
                saved.update((result.structured_content or {})["data"])

            await both_told(save_through_a)
            # the relay announces changes of finished documents: deleting the note before its
            # ingestion ends would change nothing a relay announces
            assert await _until_ready(a, saved["document_id"]), saved
            on_b = await _listed(clients["B"])
            assert f"pgrag://documents/{saved['document_id']}" in {u for u, _ in on_b}, on_b
            assert [h[0] for h in await _hits(clients["B"], "herons")] == [saved["path"]]

            # 3. deleted through process B (REST): A's client is told, and A lists it no more
            async def delete_through_b() -> None:
                async with httpx2.AsyncClient(timeout=30) as hc:
                    r = await hc.delete(f"{b.base}/api/documents/{saved['document_id']}")
                assert r.status_code == 204, r.text

            await both_told(delete_through_b)
            on_a = await _listed(clients["A"])
            assert f"pgrag://documents/{saved['document_id']}" not in {u for u, _ in on_a}
            assert on_a == await _listed(clients["B"]) == listed["A"]
