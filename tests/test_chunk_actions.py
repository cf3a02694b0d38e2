"""Chunk actions (issue #42, Deliver 5) through a real MCP client on a real PostgreSQL: a
disabled chunk is gone from search in every mode and from the SQL functions a psql user
calls, comes back (same ranking) when enabled, shows in get_document_data, is audited,
survives re-ingesting its unchanged file; another collection's key cannot touch it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor, Outcome
from pgrag.mcp.server import build_server
from pgrag.services.identity import set_identity
from pgrag.settings import load_settings

pytestmark = pytest.mark.anyio

HASH = "hash/384"
MODES = ("hybrid", "semantic", "keyword", "exact")
HERON = "# Heron\n\nThe grey heron stalks frogs in the shallow Okavango marsh at dawn."
FINCH = "# Finch\n\nA zebra finch sings near the heron colony in the Okavango delta."


@contextlib.asynccontextmanager
async def connect(dsn: str, **overrides: Any) -> AsyncIterator[Client]:
    settings = load_settings(
        database_url=dsn, embedding_model=HASH, toolsets="core,write", **overrides
    )
    async with Client(build_server(settings), raise_exceptions=True) as client:
        yield client


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    body = result.structured_content
    assert body is not None and result.is_error == (not body["ok"])
    return body


async def ok(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    body = await call(client, tool, args)
    assert body["ok"], body["error"]
    return body["data"]  # type: ignore[no-any-return]


async def hits(client: Client, query: str, mode: str) -> list[int]:
    data = await ok(client, "search", {"query": query, "mode": mode, "limit": 20})
    return [int(r["chunk_id"]) for r in data["results"]]


async def all_modes(client: Client) -> dict[str, list[int]]:
    found = {mode: await hits(client, "heron Okavango", mode) for mode in MODES}
    found["regex"] = await hits(client, "heron", "regex")
    return found


def query(dsn: str, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


async def ingest(dsn: str, folder: Path) -> dict[str, Outcome]:
    async with open_database(load_settings(embedding_model=HASH), dsn=dsn, max_size=2) as db:
        summary = await Ingestor(db.pool, HashEmbedder(HASH)).run([folder])
    return {r.path: r.outcome for r in summary.results}


def heron_chunk(dsn: str) -> int:
    (chunk_id,) = query(
        dsn,
        "SELECT c.id FROM pgrag.chunks c JOIN pgrag.documents d ON d.id = c.document_id"
        " WHERE d.path = 'heron.md'",
    )[0]
    return int(chunk_id)


async def chunk_flags(client: Client, dsn: str) -> dict[int, bool]:
    (doc_id,) = query(dsn, "SELECT id::text FROM pgrag.documents WHERE path = 'heron.md'")[0]
    data = await ok(client, "get_document_data", {"document_id": doc_id, "format": "chunks"})
    return {c["chunk_id"]: c["disabled"] for c in data["chunks"]}


async def test_disabled_chunk_is_gone_from_every_mode_and_back_when_enabled(
    dsn: str, tmp_path: Path
) -> None:
    (tmp_path / "heron.md").write_text(HERON, encoding="utf-8")
    (tmp_path / "finch.md").write_text(FINCH, encoding="utf-8")
    assert set((await ingest(dsn, tmp_path)).values()) == {Outcome.ADDED}
    chunk = heron_chunk(dsn)
    async with connect(dsn) as client:
        before = await all_modes(client)
        assert all(chunk in ids for ids in before.values()), before
        assert await chunk_flags(client, dsn) == {chunk: False}

        body = await call(client, "set_chunk_enabled", {"chunk_id": chunk, "enabled": False})
        assert body["ok"] and body["status"]["message"] == "CHUNK_DISABLED"
        assert body["data"]["enabled"] is False and body["data"]["disabled_at"]
        gone = await all_modes(client)
        assert all(chunk not in ids for ids in gone.values()), gone
        assert all(gone[m] == [i for i in before[m] if i != chunk] for m in before), gone
        assert await chunk_flags(client, dsn) == {chunk: True}

        # the SQL a psql user calls leaves it out too
        assert chunk not in {
            r[0] for r in query(dsn, "SELECT chunk_id FROM pgrag.regex_search('heron')")
        }

        # re-ingesting the unchanged file keeps the chunk, and so its state
        assert (await ingest(dsn, tmp_path))["heron.md"] == Outcome.UNCHANGED
        assert heron_chunk(dsn) == chunk
        assert await chunk_flags(client, dsn) == {chunk: True}
        assert all(chunk not in ids for ids in (await all_modes(client)).values())

        back = await ok(client, "set_chunk_enabled", {"chunk_id": chunk, "enabled": True})
        assert back["enabled"] is True and back["disabled_at"] is None
        assert await all_modes(client) == before  # the same ranking as before, to the order
        assert await chunk_flags(client, dsn) == {chunk: False}

    audited = query(
        dsn,
        "SELECT arguments, outcome FROM pgrag.audit_log WHERE tool = 'set_chunk_enabled'"
        " ORDER BY id",
    )
    assert [(a["chunk_id"], a["enabled"], o) for a, o in audited] == [
        (chunk, False, "CHUNK_DISABLED"),
        (chunk, True, "CHUNK_ENABLED"),
    ]


async def test_sql_functions_disable_and_enable(dsn: str, tmp_path: Path) -> None:
    (tmp_path / "heron.md").write_text(HERON, encoding="utf-8")
    await ingest(dsn, tmp_path)
    chunk = heron_chunk(dsn)
    regex = "SELECT chunk_id FROM pgrag.regex_search('heron')"
    assert query(dsn, regex) == [(chunk,)]
    (row,) = query(
        dsn, "SELECT chunk_id, disabled_at IS NOT NULL FROM pgrag.disable_chunk(%s)", (chunk,)
    )
    assert row == (chunk, True)
    assert query(dsn, regex) == []
    assert query(dsn, "SELECT * FROM pgrag.disable_chunk(0)") == []  # no such chunk: no row
    assert query(dsn, "SELECT disabled_at FROM pgrag.enable_chunk(%s)", (chunk,)) == [(None,)]
    assert query(dsn, regex) == [(chunk,)]


async def test_a_key_of_another_collection_cannot_disable_it(dsn: str, tmp_path: Path) -> None:
    (tmp_path / "heron.md").write_text(HERON, encoding="utf-8")
    await ingest(dsn, tmp_path)
    chunk = heron_chunk(dsn)
    query(dsn, "INSERT INTO pgrag.collections (name) VALUES ('elsewhere')")
    set_identity("key:elsewhere", ["elsewhere"])  # inherited by the in-process server's tasks
    try:
        async with connect(dsn, read_only=False) as client:
            body = await call(client, "set_chunk_enabled", {"chunk_id": chunk, "enabled": False})
    finally:
        set_identity("local", None)
    assert not body["ok"] and body["error"]["code"] == "NOT_FOUND", body
    assert query(dsn, "SELECT disabled_at FROM pgrag.chunks WHERE id = %s", (chunk,)) == [(None,)]
    # a key limited to the chunk's own collection may
    (own,) = query(dsn, "SELECT collection_id FROM pgrag.chunks WHERE id = %s", (chunk,))[0]
    (name,) = query(dsn, "SELECT name FROM pgrag.collections WHERE id = %s", (own,))[0]
    set_identity("key:own", [name])
    try:
        async with connect(dsn, read_only=False) as client:
            data = await ok(client, "set_chunk_enabled", {"chunk_id": chunk, "enabled": False})
    finally:
        set_identity("local", None)
    assert data["enabled"] is False


async def test_read_only_server_refuses(dsn: str, tmp_path: Path) -> None:
    (tmp_path / "heron.md").write_text(HERON, encoding="utf-8")
    await ingest(dsn, tmp_path)
    async with connect(dsn, read_only=True) as client:
        body = await call(
            client, "set_chunk_enabled", {"chunk_id": heron_chunk(dsn), "enabled": False}
        )
    assert not body["ok"] and body["error"]["code"] == "FORBIDDEN"
