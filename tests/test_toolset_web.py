"""`web_search` against a real local HTTP server speaking SearXNG's JSON format: results
are normalised and capped, cached in Postgres (the server's hit count proves it) until
the TTL runs out, and upstream failures are UPSTREAM_ERROR."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from mcp import Client

from pgrag.mcp.server import build_server
from pgrag.settings import load_settings
from tests.support.searxng import FakeSearxng
from tests.support.servers import free_port

pytestmark = pytest.mark.anyio


@pytest.fixture
def searxng() -> Iterator[FakeSearxng]:
    with FakeSearxng() as sx:
        yield sx


@contextlib.asynccontextmanager
async def connect(dsn: str, **overrides: Any) -> AsyncIterator[Client]:
    settings = load_settings(
        database_url=dsn, embedding_model="hash/384", toolsets="web", **overrides
    )
    async with Client(build_server(settings), raise_exceptions=True) as client:
        yield client


async def web(client: Client, **args: Any) -> dict[str, Any]:
    result = await client.call_tool("web_search", args)
    body = result.structured_content
    assert body is not None and result.is_error == (not body["ok"])
    return body


def cache_rows(dsn: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT query, language, recency_days, jsonb_array_length(items) FROM pgrag.web_cache"
        ).fetchall()


async def test_results_are_normalised_and_capped(dsn: str, searxng: FakeSearxng) -> None:
    async with connect(dsn, searxng_url=searxng.url) as client:
        body = await web(client, query="  postgres   vector search ", max_results=20)
        assert body["ok"] and body["status"]["message"] == "WEB_SEARCH_COMPLETED"
        data = body["data"]
        assert data["query"] == "postgres vector search" and data["cached"] is False
        items = data["items"]
        assert len(items) == 20  # 25 upstream (+1 without URL, +1 duplicate), capped
        assert [i["rank"] for i in items] == list(range(1, 21))
        urls = [i["url"] for i in items]
        assert len(set(urls)) == 20 and urls[:3] == [f"https://example.org/{n}" for n in (1, 2, 3)]
        first = items[0]
        assert first["title"] == "Result 1 for postgres vector search"  # whitespace collapsed
        assert first["snippet"] == "Snippet number 1 about postgres vector search."
        assert first["source"] == "searxng" and first["engine"] == "duckduckgo"
        assert first["engines"] == ["duckduckgo", "brave"]
        published = datetime.fromisoformat(first["published_at"])
        assert published.tzinfo is not None  # naive upstream dates become RFC 3339 UTC
        assert items[2]["published_at"] is None
        assert data["total"] == 1234

        few = (await web(client, query="postgres vector search"))["data"]
        assert len(few["items"]) == 5  # default max_results

        too_many = await client.call_tool("web_search", {"query": "x", "max_results": 21})
        assert too_many.is_error
        assert too_many.structured_content["error"]["code"] == "INVALID_ARGUMENT"
    sent = searxng.requests[0]
    assert sent["format"] == "json" and sent["q"] == "postgres vector search"
    assert "language" not in sent and "time_range" not in sent


async def test_language_and_recency_reach_searxng(dsn: str, searxng: FakeSearxng) -> None:
    async with connect(dsn, searxng_url=searxng.url) as client:
        data = (
            await web(client, query="合同 管理", language="zh-CN", recency_days=30, max_results=20)
        )["data"]
        assert data["time_range"] == "month" and data["language"] == "zh-CN"
        # results with a known date older than 30 days are dropped; undated ones stay
        oldest = datetime.now(UTC) - timedelta(days=30)
        for item in data["items"]:
            if item["published_at"]:
                assert datetime.fromisoformat(item["published_at"]) >= oldest
        assert "https://example.org/5" not in [i["url"] for i in data["items"]]
        assert "https://example.org/3" in [i["url"] for i in data["items"]]  # undated

        bad = await web(client, query="x", language="zh CN; drop")
        assert bad["error"]["code"] == "INVALID_ARGUMENT"
    assert searxng.requests[0]["language"] == "zh-CN"
    assert searxng.requests[0]["time_range"] == "month"
    assert searxng.hits == 1


async def test_repeated_queries_come_from_the_cache(dsn: str, searxng: FakeSearxng) -> None:
    async with connect(dsn, searxng_url=searxng.url) as client:
        first = (await web(client, query="Hybrid Search", max_results=3))["data"]
        assert searxng.hits == 1 and first["cached"] is False
        again = (await web(client, query="hybrid   search", max_results=10))["data"]
        assert searxng.hits == 1 and again["cached"] is True
        assert again["fetched_at"] == first["fetched_at"]
        assert [i["url"] for i in again["items"][:3]] == [i["url"] for i in first["items"]]
        assert len(again["items"]) == 10
        # another language or recency is another cache entry
        await web(client, query="hybrid search", language="de")
        await web(client, query="hybrid search", recency_days=7)
        assert searxng.hits == 3
    assert sorted(r[1:3] for r in cache_rows(dsn)) == [("", 0), ("", 7), ("de", 0)]
    assert {r[0] for r in cache_rows(dsn)} == {"hybrid search"}


async def test_expired_entries_are_fetched_again(dsn: str, searxng: FakeSearxng) -> None:
    async with connect(dsn, searxng_url=searxng.url, web_cache_ttl_s=0) as client:
        assert (await web(client, query="ttl"))["data"]["cached"] is False
        assert (await web(client, query="ttl"))["data"]["cached"] is False
        assert searxng.hits == 2
    # the same stored entry is fresh again for a server with a longer TTL
    async with connect(dsn, searxng_url=searxng.url, web_cache_ttl_s=3600) as client:
        assert (await web(client, query="ttl"))["data"]["cached"] is True
        assert searxng.hits == 2


async def test_upstream_errors_are_upstream_error(dsn: str, searxng: FakeSearxng) -> None:
    async with connect(dsn, searxng_url=searxng.url, web_timeout_s=0.3) as client:
        searxng.status = 500
        failed = await web(client, query="boom")
        assert failed["error"]["code"] == "UPSTREAM_ERROR"
        assert failed["error"]["detail"]["status"] == 500
        searxng.status = 403
        forbidden = await web(client, query="boom")
        assert forbidden["error"]["code"] == "UPSTREAM_ERROR"
        assert "json" in forbidden["error"]["message"]
        searxng.status = 200
        searxng.html = True
        html = await web(client, query="boom")
        assert html["error"]["code"] == "UPSTREAM_ERROR"
        searxng.html = False
        searxng.delay = 3.0
        slow = await web(client, query="boom")
        assert slow["error"]["code"] == "UPSTREAM_ERROR"
        assert slow["error"]["detail"]["reason"] == "timeout"
        searxng.delay = 0.0
        assert cache_rows(dsn) == []  # failures are not cached
        recovered = await web(client, query="boom")
        assert recovered["ok"] and recovered["data"]["cached"] is False
    assert searxng.hits == 5


async def test_unreachable_searxng_is_upstream_error(dsn: str) -> None:
    async with connect(dsn, searxng_url=f"http://127.0.0.1:{free_port()}") as client:
        body = await web(client, query="anything")
    assert body["error"]["code"] == "UPSTREAM_ERROR"
    assert body["error"]["detail"]["reason"] == "connection"


async def test_without_searxng_url_the_tool_says_how_to_enable_it(dsn: str) -> None:
    async with connect(dsn) as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        assert tools == ["web_search"]
        body = await web(client, query="anything")
    assert body["error"]["code"] == "FORBIDDEN"
    assert "PGRAG_SEARXNG_URL" in body["error"]["message"]
