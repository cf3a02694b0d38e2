"""The `web` toolset: `web_search` through a SearXNG instance.

`GET {PGRAG_SEARXNG_URL}/search?q=…&format=json[&language=…][&time_range=…]`; the results
are normalised (title, url, snippet, source, engine, published_at) and cached in
`pgrag.web_cache` (`pgrag.store.web_cache`) by (query, language, recency) for PGRAG_WEB_CACHE_TTL_S seconds. Timeouts,
refused connections, HTTP errors and unreadable answers are UPSTREAM_ERROR.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import httpx2
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from pgrag import __version__
from pgrag.errors import ErrorCode, PgragError, UpstreamError
from pgrag.mcp.app_state import enveloped, state_of
from pgrag.mcp.envelope import Envelope, Status
from pgrag.services.context import SEARCH_TIMEOUT_S
from pgrag.store.web_cache import cached, remember

MAX_RESULTS = 20
MAX_CACHED_ITEMS = 50
SNIPPET_CHARS = 500
LANGUAGE = re.compile(r"^(all|auto|[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8}){0,2})$")


class WebItem(BaseModel):
    rank: int
    title: str
    url: str
    snippet: str
    source: str = Field("searxng", description="the search service")
    engine: str | None = Field(None, description="the engine SearXNG got it from")
    engines: list[str] = Field(default_factory=list)
    published_at: str | None = Field(None, description="RFC 3339, when the engine knows it")
    score: float | None = None


class WebSearchData(BaseModel):
    query: str
    items: list[WebItem]
    cached: bool = Field(description="served from pgrag's cache, not asked upstream")
    fetched_at: str
    language: str | None
    recency_days: int | None
    time_range: str | None = Field(None, description="what SearXNG was asked: day|week|month|year")
    total: int | None = Field(None, description="the upstream's estimate of all matches")


def time_range(recency_days: int | None) -> str | None:
    """SearXNG only knows day/week/month/year: the smallest one covering the request
    (results with a known older date are then dropped)."""
    if not recency_days:
        return None
    for days, name in ((1, "day"), (7, "week"), (31, "month"), (366, "year")):
        if recency_days <= days:
            return name
    return None


def _published(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip().replace("Z", "+00:00")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def normalise(payload: Any) -> tuple[list[dict[str, Any]], int | None]:
    """SearXNG's JSON to pgrag's items (upstream order, duplicates by URL dropped)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("results"), list):
        raise UpstreamError(
            "SearXNG answered without a `results` list: is PGRAG_SEARXNG_URL a SearXNG instance?",
            detail={"upstream": "searxng"},
        )
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for r in payload["results"]:
        if not isinstance(r, dict):
            continue
        url = str(r.get("url") or "").strip()
        if not url.startswith(("http://", "https://")) or url in seen:
            continue
        seen.add(url)
        engines = [str(e) for e in r.get("engines") or [] if e]
        engine = str(r.get("engine") or (engines[0] if engines else "")) or None
        when = _published(r.get("publishedDate") or r.get("pubdate"))
        score = r.get("score")
        items.append(
            {
                "title": " ".join(str(r.get("title") or url).split()),
                "url": url,
                "snippet": " ".join(str(r.get("content") or "").split())[:SNIPPET_CHARS],
                "source": "searxng",
                "engine": engine,
                "engines": engines or ([engine] if engine else []),
                "published_at": when.isoformat() if when else None,
                "score": float(score) if isinstance(score, int | float) else None,
            }
        )
        if len(items) >= MAX_CACHED_ITEMS:
            break
    if not items and payload.get("unresponsive_engines"):
        raise UpstreamError(
            "SearXNG's engines did not answer: retry later",
            detail={"upstream": "searxng", "unresponsive_engines": payload["unresponsive_engines"]},
        )
    total = payload.get("number_of_results")
    return items, int(total) if isinstance(total, int | float) and total > 0 else None


async def fetch(
    base_url: str, query: str, language: str | None, tr: str | None, timeout: float
) -> Any:
    params = {"q": query, "format": "json"}
    if language:
        params["language"] = language
    if tr:
        params["time_range"] = tr
    url = base_url.rstrip("/") + "/search"
    try:
        async with httpx2.AsyncClient(
            timeout=httpx2.Timeout(timeout),
            follow_redirects=True,
            headers={"Accept": "application/json", "User-Agent": f"pgrag/{__version__}"},
        ) as client:
            resp = await client.get(url, params=params)
    except httpx2.TimeoutException as exc:
        raise UpstreamError(
            f"SearXNG did not answer within {timeout:g}s: retry later or with a simpler query",
            detail={"upstream": "searxng", "reason": "timeout"},
        ) from exc
    except httpx2.HTTPError as exc:
        raise UpstreamError(
            f"cannot reach SearXNG at {base_url} ({type(exc).__name__}): retry later",
            detail={"upstream": "searxng", "reason": "connection"},
        ) from exc
    if resp.status_code != 200:
        hint = (
            ": enable the json format (search.formats in SearXNG's settings.yml)"
            if resp.status_code == 403
            else ": retry later"
        )
        raise UpstreamError(
            f"SearXNG answered HTTP {resp.status_code}{hint}",
            detail={"upstream": "searxng", "status": resp.status_code},
        )
    try:
        return resp.json()
    except ValueError as exc:
        raise UpstreamError(
            "SearXNG's answer is not JSON: enable the json format in its settings.yml",
            detail={"upstream": "searxng", "reason": "not_json"},
        ) from exc


def _fresh(items: list[dict[str, Any]], recency_days: int | None) -> list[dict[str, Any]]:
    if not recency_days:
        return items
    oldest = datetime.now(UTC) - timedelta(days=recency_days)
    return [
        i
        for i in items
        if not i.get("published_at") or (_published(i["published_at"]) or oldest) >= oldest
    ]


async def web_search(
    query: Annotated[str, Field(min_length=1, max_length=1000, description="what to look up")],
    ctx: Context[Any, Any],
    max_results: Annotated[
        int, Field(ge=1, le=MAX_RESULTS, description="results to return (default 5, max 20)")
    ] = 5,
    language: Annotated[
        str | None, Field(max_length=20, description="e.g. zh-CN, en, de; default: any")
    ] = None,
    recency_days: Annotated[
        int | None, Field(ge=1, le=3650, description="only results from the last N days")
    ] = None,
) -> Annotated[CallToolResult, Envelope[WebSearchData]]:
    """Search the web for current information (through the operator's SearXNG) and get
    titles, URLs, snippets, engines and publication dates to cite. Repeated queries are
    answered from a cache for a while (`cached: true`). Not for the knowledge base: use
    `search` for the documents. Errors: UPSTREAM_ERROR when SearXNG fails or times out;
    FORBIDDEN when this server has no SearXNG configured."""
    state = state_of(ctx)
    s = state.settings
    if not s.searxng_url:
        raise PgragError(
            "web search is not configured on this server: the operator must set "
            "PGRAG_SEARXNG_URL to a SearXNG instance (with the json format enabled)",
            code=ErrorCode.FORBIDDEN,
            detail={"setting": "PGRAG_SEARXNG_URL"},
        )
    if not s.searxng_url.startswith(("http://", "https://")):
        raise UpstreamError(
            "PGRAG_SEARXNG_URL is not an http(s) URL: the operator must fix it",
            detail={"setting": "PGRAG_SEARXNG_URL"},
        )
    text = " ".join(query.split())
    if not text:
        raise PgragError("query is blank", code=ErrorCode.INVALID_ARGUMENT)
    lang = language.strip() if language and language.strip() else None
    if lang and not LANGUAGE.match(lang):
        raise PgragError(
            f"language '{lang}' is not a language code: use e.g. zh-CN, en, de or all",
            code=ErrorCode.INVALID_ARGUMENT,
            detail={"field": "language"},
        )
    tr = time_range(recency_days)
    key = {"query": text.lower(), "language": lang or "", "recency": recency_days or 0}
    ttl = s.web_cache_ttl_s
    async with state.pool.connection() as conn:
        hit = await cached(conn, key, ttl)
    if hit is not None:
        items, total, fetched_at = hit
    else:
        payload = await fetch(s.searxng_url, text, lang, tr, s.web_timeout_s)
        items, total = normalise(payload)
        async with state.pool.connection() as conn:
            fetched_at = await remember(conn, key, items, total, ttl)
    chosen = _fresh(items, recency_days)[:max_results]
    data = WebSearchData(
        query=text,
        items=[WebItem(rank=n, **i) for n, i in enumerate(chosen, start=1)],
        cached=hit is not None,
        fetched_at=fetched_at.isoformat(),
        language=lang,
        recency_days=recency_days,
        time_range=tr,
        total=total,
    )
    message = "WEB_SEARCH_COMPLETED" if chosen else "NO_RESULTS"
    return Envelope[WebSearchData](data=data, status=Status(message=message))  # type: ignore[return-value]  # see enveloped


def register(server: MCPServer[Any]) -> None:
    """Publish web_search (read-only, but it reaches the outside world)."""
    server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True))(
        enveloped(timeout=SEARCH_TIMEOUT_S)(web_search)
    )
