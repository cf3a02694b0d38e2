"""One search through each entry point, for tests that compare them: the MCP `search` tool
through the SDK client, REST's GET /api/search, and pgrag.hybrid_search in SQL with a
ranking option passed as the named argument it is."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import httpx2
import psycopg
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from psycopg import sql

from tests.support.kb_server import FULL_KEY, HttpServer


def mcp_search(url: str, args: dict[str, Any], key: str = FULL_KEY) -> dict[str, Any]:
    """The MCP `search` tool's data through the SDK client (in its own thread and loop:
    Playwright's sync API may own this one)."""

    async def call() -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {key}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as hc,
            Client(streamable_http_client(url, http_client=hc), cache=None) as client,
        ):
            result = await client.call_tool("search", args)
            assert not result.is_error, result.content
            assert result.structured_content is not None
            data: dict[str, Any] = result.structured_content["data"]
            return data

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, call()).result()


def rest_search(base: str, params: dict[str, Any], key: str = FULL_KEY) -> httpx2.Response:
    with httpx2.Client(base_url=base, timeout=120) as client:
        return client.get("/api/search", params=params, headers={"Authorization": f"Bearer {key}"})


def warm_up(server: HttpServer, tries: int = 4) -> None:
    """One search until the server answers it: the first one loads the embedding model,
    which on a loaded machine can outlast a call's time limit."""
    for _ in range(tries):
        if rest_search(server.base, {"q": "warm up the model"}).status_code == 200:
            return
    raise AssertionError("the server answered no search")


# the logged search's query, vector, collections, model and language, and `options` by name
HYBRID_SQL = """
SELECT h.chunk_id
FROM pgrag.search_log l, pgrag.hybrid_search(
    query_text => l.query, query_embedding => l.query_embedding,
    match_count => (l.params ->> 'match_count')::int,
    collection_ids => ARRAY(SELECT x::bigint FROM jsonb_array_elements_text(
                                l.params -> 'collection_ids') x),
    filters => %(filters)s::jsonb,
    embedding_model => l.params ->> 'embedding_model', query_lang => l.params ->> 'query_lang',
    opts => pgrag.ranking_options({options})) h
WHERE l.id = %(log_id)s
ORDER BY h.rank
"""


def sql_order(dsn: str, log_id: int, options: dict[str, Any], filters: str = "{}") -> list[int]:
    """The chunk ids pgrag.hybrid_search ranks for logged search `log_id`'s query and vector,
    with each of `options` as the named argument of pgrag.ranking_options."""
    named = sql.SQL(", ").join(
        sql.SQL("{} => {}").format(sql.Identifier(k), sql.Placeholder(k)) for k in options
    )
    query = sql.SQL(HYBRID_SQL).format(options=named)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(query, {**options, "log_id": log_id, "filters": filters}).fetchall()
    return [int(r[0]) for r in rows]
