"""Prometheus metrics of one pgrag process, served at `/metrics` by the HTTP server.

Counters and histograms live in the default registry of `prometheus_client` (so the
process and platform collectors come along). The helpers below are the only places that
touch them: the search service, the MCP tool wrapper and the ingestion pipeline each call
one of them, and never fail because of a metric.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

from pgrag.errors import ErrorCode

T = TypeVar("T")

SEARCH_REQUESTS = Counter(
    "pgrag_search_requests_total",
    "Searches by mode and outcome (ok, or the stable error code).",
    ["mode", "outcome"],
)
SEARCH_LATENCY = Histogram(
    "pgrag_search_latency_seconds",
    "Wall time of a search (embedding the query, ranking SQL, snippets, logging).",
    ["mode"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
TOOL_CALLS = Counter(
    "pgrag_tool_calls_total",
    "MCP tool calls by tool and outcome (ok, or the stable error code).",
    ["tool", "outcome"],
)
CALLS = Counter(
    "pgrag_calls_total",
    "Guarded calls (MCP tools and resources, REST routes, console pages) by transport, call "
    "and outcome (ok, or the stable error code).",
    ["transport", "call", "outcome"],
)
RERANK_CALLS = Counter(
    "pgrag_rerank_calls_total",
    "Rerank calls by outcome (ok; timeout, error, malformed, partial: the fused order stood).",
    ["outcome"],
)
RERANK_COST = Histogram(
    "pgrag_rerank_cost_usd",
    "Cost of one search's rerank call in USD, as litellm prices it (unpriced calls count 0).",
    buckets=(0.0, 0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1),
)
HELD_CALLS = Counter(
    "pgrag_calls_held_total",
    "Calls whose caller had spent its share of slow work: held, or refused RATE_LIMITED.",
    ["outcome"],
)
HELD_SECONDS = Counter(
    "pgrag_calls_held_seconds_total", "Seconds calls waited for their caller's share of slow work."
)
INGEST_DOCUMENTS = Counter(
    "pgrag_ingest_documents_total",
    "Documents handled by ingestion, by outcome (added, updated, unchanged, removed, failed, pending).",
    ["outcome"],
)

SOURCE_PENDING = Gauge(
    "pgrag_source_pending",
    "Rows of a table source waiting to be indexed: queued changes and rows not yet backfilled.",
    ["source"],
)
SOURCE_LAG = Gauge(
    "pgrag_source_lag_seconds", "Age of a table source's oldest queued change.", ["source"]
)

CONTENT_TYPE = CONTENT_TYPE_LATEST


def set_sources(found: list[tuple[str, int, float]]) -> None:
    """The table sources' gauges: (name, pending, lag seconds) each; gone sources dropped."""
    SOURCE_PENDING.clear()
    SOURCE_LAG.clear()
    for name, pending, lag in found:
        SOURCE_PENDING.labels(name).set(pending)
        SOURCE_LAG.labels(name).set(lag)


def render() -> bytes:
    """The Prometheus text exposition of every metric of this process."""
    return generate_latest()


def outcome_of(exc: BaseException | None) -> str:
    """`ok`, or a stable error code (a bounded set of label values)."""
    if exc is None:
        return "ok"
    code = getattr(exc, "code", None)
    if code is not None:  # PgragError and its subclasses
        return str(code)
    if isinstance(exc, asyncio.CancelledError):
        return "CANCELLED"
    if isinstance(exc, TimeoutError):
        return str(ErrorCode.TIMEOUT)
    import psycopg

    from pgrag.errors import setup_error

    if setup_error(exc) is not None:
        return str(ErrorCode.DB_SETUP)
    return str(ErrorCode.DB_ERROR if isinstance(exc, psycopg.Error) else ErrorCode.INTERNAL)


def observe_search(
    method: Callable[..., Awaitable[T]],
) -> Callable[..., Awaitable[T]]:
    """Decorates `SearchService.search(self, req, ...)`: count it and time it by mode."""

    @functools.wraps(method)
    async def wrapper(self: Any, req: Any, *args: Any, **kwargs: Any) -> T:
        spec = getattr(req, "spec", None)
        mode = str(spec.name if spec is not None else getattr(req, "mode", "unknown"))
        started = time.perf_counter()
        error: BaseException | None = None
        try:
            return await method(self, req, *args, **kwargs)
        except BaseException as exc:
            error = exc
            raise
        finally:
            SEARCH_LATENCY.labels(mode).observe(time.perf_counter() - started)
            SEARCH_REQUESTS.labels(mode, outcome_of(error)).inc()

    return wrapper


def count_call(transport: str, call: str, outcome: str, *, tool: bool = False) -> None:
    """One guarded call; an MCP tool call is counted by tool as well."""
    CALLS.labels(transport, call, outcome).inc()
    if tool:
        TOOL_CALLS.labels(call, outcome).inc()


def count_held_call(outcome: str, seconds: float) -> None:
    HELD_CALLS.labels(outcome).inc()
    HELD_SECONDS.inc(seconds)


def counting_reporter(reporter: Callable[[Any], None]) -> Callable[[Any], None]:
    """Wraps an ingestion reporter: every `file_done` event counts its document's outcome."""

    def report(event: Any) -> None:
        result = getattr(event, "result", None)
        if getattr(event, "kind", None) == "file_done" and result is not None:
            INGEST_DOCUMENTS.labels(str(result.outcome)).inc()
        reporter(event)

    return report


def count_ingest(outcome: str, n: int = 1) -> None:
    if n:
        INGEST_DOCUMENTS.labels(outcome).inc(n)


def observe_rerank(outcome: str, cost: float | None) -> None:
    """One rerank call: its outcome, and (whatever the outcome) what it was priced at."""
    RERANK_CALLS.labels(outcome).inc()
    RERANK_COST.observe(cost or 0.0)
