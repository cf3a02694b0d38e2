"""README "Development", "Add an MCP tool", done for real: a handler that calls a service,
wrapped with `enveloped()` and registered, answers through an MCP client in pgrag's envelope,
under its function's name (listed, called, counted and audited by that name)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from mcp import Client
from mcp.server.mcpserver import Context
from pydantic import BaseModel

from pgrag.mcp.app_state import enveloped, scope_of, state_of
from pgrag.mcp.envelope import Envelope
from pgrag.mcp.server import build_server
from pgrag.mcp.toolsets.core.common import READ_ONLY, result
from pgrag.services import documents as docs
from pgrag.settings import load_settings

pytestmark = pytest.mark.anyio


class FolderCount(BaseModel):
    folders: int


@enveloped()
async def count_folders(ctx: Context[Any, Any]) -> result(FolderCount):  # type: ignore[valid-type]
    """How many folders the caller can see."""
    rows = await docs.folders_of(state_of(ctx).pool, scope_of(ctx))
    return Envelope[FolderCount](data=FolderCount(folders=len(rows)))


async def test_a_new_tool_is_a_handler_and_one_registration(dsn: str) -> None:
    server = build_server(load_settings(database_url=dsn, embedding_model="hash/384"))
    server.tool(annotations=READ_ONLY)(count_folders)
    async with Client(server, raise_exceptions=True) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        answer = await client.call_tool("count_folders", {})
    assert "count_folders" in listed
    body = answer.structured_content
    assert body is not None and body["ok"] and not answer.is_error, body
    assert body["data"] == {"folders": 0}  # a fresh database: nothing ingested
    with psycopg.connect(dsn) as conn:
        audited = conn.execute("SELECT tool, outcome FROM pgrag.audit_log").fetchall()
    assert audited == [("count_folders", "SUCCESS")]
