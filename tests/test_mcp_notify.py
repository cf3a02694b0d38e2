"""Connected MCP sessions learn about new, changed and removed documents, whichever process
made the change (Postgres LISTEN/NOTIFY relays it)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.support.commands import pgrag_cmd

pytestmark = pytest.mark.anyio

MODEL = ["--embedding-model", "hash/384"]


def _recorder() -> tuple[list[str], Any]:
    """Collects the methods of the notifications a client receives."""
    got: list[str] = []

    async def on_message(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method:
            got.append(method)

    return got, on_message


async def _wait_for(predicate: Any, timeout: float = 15.0) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.1)
    return predicate()


async def test_resource_list_changed_reaches_a_stdio_session(dsn: str, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nfirst document\n", encoding="utf-8")
    got: list[str] = []

    async def on_message(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method:
            got.append(method)

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "pgrag", "--database-url", dsn, *MODEL, "serve"]
    )
    async with Client(
        params, mode="legacy", message_handler=on_message, read_timeout_seconds=60
    ) as client:
        before = await client.list_resources()
        ingest = subprocess.run(
            pgrag_cmd("--database-url", dsn, *MODEL, "ingest", "-q", str(folder)),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ingest.returncode == 0, ingest.stderr
        assert await _wait_for(lambda: "notifications/resources/list_changed" in got)
        after = await client.list_resources()
        assert len(after.resources) == len(before.resources) + 1

        got.clear()
        (folder / "a.md").unlink()
        subprocess.run(
            pgrag_cmd("--database-url", dsn, *MODEL, "ingest", "-q", str(folder)),
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert await _wait_for(lambda: "notifications/resources/list_changed" in got)
        assert len((await client.list_resources()).resources) == len(before.resources)


async def test_serve_watch_ingests_and_notifies(dsn: str, tmp_path: Path) -> None:
    folder = tmp_path / "watched"
    folder.mkdir()
    (folder / "first.txt").write_text("zebras live in Africa", encoding="utf-8")
    got: list[str] = []

    async def on_message(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method:
            got.append(method)

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pgrag", "--database-url", dsn, *MODEL, "serve", "--watch", str(folder)],
    )
    async with Client(
        params, mode="legacy", message_handler=on_message, read_timeout_seconds=60
    ) as client:

        async def names() -> set[str]:
            return {r.name for r in (await client.list_resources()).resources}

        assert await _wait_for_async(lambda: names(), lambda n: "first.txt" in n)
        (folder / "second.txt").write_text("giraffes too", encoding="utf-8")
        assert await _wait_for_async(lambda: names(), lambda n: "second.txt" in n)
        assert await _wait_for(lambda: "notifications/resources/list_changed" in got)


async def _wait_for_async(fetch: Any, check: Any, timeout: float = 30.0) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if check(await fetch()):
            return True
        await asyncio.sleep(0.3)
    return False
