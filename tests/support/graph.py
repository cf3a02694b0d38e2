"""Helpers and fixtures of tests/test_graph*.py."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
from mcp import Client

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.mcp.server import build_server
from pgrag.settings import load_settings

HASH = "hash/384"


WRITE_TOOLS = {
    "graph_create_node": {"label": "Person", "name": "Nobody"},
    "graph_update_node": {"id": "{node}", "name": "Renamed"},
    "graph_delete_node": {"id": "{node}", "detach": True},
    "graph_create_relationship": {"from_id": "{node}", "to_id": "{node}", "type": "RELATED_TO"},
    "graph_update_relationship": {"id": "{rel}", "properties": {"x": 1}},
    "graph_delete_relationship": {"id": "{rel}"},
}


@contextlib.asynccontextmanager
async def graph_client(dsn: str, **settings: Any) -> AsyncIterator[Client]:
    server = build_server(
        load_settings(database_url=dsn, toolsets="core,graph", embedding_model=HASH, **settings)
    )
    async with Client(server, raise_exceptions=True) as client:
        yield client


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    payload = result.structured_content
    assert payload is not None
    assert payload["ok"] is (not result.is_error)
    return payload


async def ok(client: Client, tool: str, **args: Any) -> Any:
    payload = await call(client, tool, **args)
    assert payload["ok"], payload["error"]
    return payload["data"]


async def fails(client: Client, tool: str, code: str, **args: Any) -> dict[str, Any]:
    payload = await call(client, tool, **args)
    assert not payload["ok"], payload["data"]
    assert payload["error"]["code"] == code, payload["error"]
    assert payload["status"]["code"] == "error"
    return payload["error"]


async def node(client: Client, label: str, name: str, **props: Any) -> str:
    data = await ok(client, "graph_create_node", label=label, name=name, properties=props)
    return str(data["id"])


async def rel(client: Client, src: str, dst: str, type: str = "RELATED_TO", **props: Any) -> str:
    data = await ok(
        client, "graph_create_relationship", from_id=src, to_id=dst, type=type, properties=props
    )
    return str(data["id"])


def count(dsn: str, table: str) -> int:
    with psycopg.connect(dsn) as conn:
        return int(conn.execute(f"SELECT count(*) FROM pgrag.{table}").fetchone()[0])


async def chain(c: Client) -> dict[str, str]:
    """A -> B -> C -> D -> E -> F -> G (RELATED_TO), a cycle C -> A, and A -[CITES]-> G."""
    ids = {name: await node(c, "Concept", name) for name in "ABCDEFG"}
    for src, dst in zip("ABCDEF", "BCDEFG", strict=True):
        ids[src + dst] = await rel(c, ids[src], ids[dst])
    ids["CA"] = await rel(c, ids["C"], ids["A"])
    ids["AG"] = await rel(c, ids["A"], ids["G"], "CITES")
    ids["lonely"] = await node(c, "Concept", "Lonely")
    return ids


def names(nodes: list[dict[str, Any]]) -> list[str]:
    return [n["name"] for n in nodes]


async def ingest_one(dsn: str, tmp_path: Path) -> tuple[str, list[int]]:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "lovelace.md").write_text(
        "# Ada Lovelace\n\nAda Lovelace wrote the first program for the Analytical Engine.\n",
        encoding="utf-8",
    )
    (folder / "other.md").write_text("# Other\n\nSomething else entirely.\n", encoding="utf-8")
    async with open_database(load_settings(embedding_model=HASH), dsn=dsn, max_size=2) as db:
        summary = await Ingestor(db.pool, HashEmbedder(HASH), collection="kb").run([folder])
    assert len(summary.results) == 2
    with psycopg.connect(dsn) as conn:
        doc = conn.execute(
            "SELECT id::text FROM pgrag.documents WHERE path = 'lovelace.md'"
        ).fetchone()[0]
        chunks = [
            r[0]
            for r in conn.execute(
                "SELECT c.id FROM pgrag.chunks c JOIN pgrag.documents d ON d.id = c.document_id "
                "ORDER BY d.path = 'lovelace.md' DESC, c.id"
            )
        ]
        other_chunk = conn.execute(
            "SELECT c.id FROM pgrag.chunks c JOIN pgrag.documents d ON d.id = c.document_id "
            "WHERE d.path = 'other.md'"
        ).fetchone()[0]
    return doc, [chunks[0], other_chunk]


async def existing_ids(dsn: str) -> dict[str, str]:
    async with graph_client(dsn) as c:
        a = await node(c, "Person", "Writer")
        b = await node(c, "Person", "Reader")
        return {"node": a, "other": b, "rel": await rel(c, a, b)}


def fill(args: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    return {k: v.format(**ids) if isinstance(v, str) else v for k, v in args.items()}
