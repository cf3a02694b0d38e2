"""The pgrag MCP server: lifespan (pool, provider, services), toolsets, resources."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ListResourcesResult, Resource

from pgrag import __version__
from pgrag.errors import InvalidArgument
from pgrag.mcp.app_state import AppState
from pgrag.mcp.auth import current_scope
from pgrag.mcp.core_tools import register_core
from pgrag.mcp.envelope import error_envelope, new_trace_id, to_result
from pgrag.mcp.resources import list_document_resources, register_resources
from pgrag.paging import ContinuationCodec
from pgrag.runtime import open_runtime
from pgrag.search import sql as search_sql
from pgrag.search.engine import SearchService
from pgrag.settings import Settings

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "pgrag answers questions from a document knowledge base stored in PostgreSQL. Start with "
    "`search` (hybrid by default; mode=regex for patterns); each hit has a document_id and a "
    "location (page, section, sheet rows, slide). Then read more with get_pages, "
    "get_sheet_data, get_slides or get_document_data, and use get_document_outline to see a "
    "document's structure. Responses are token-bounded: follow the CONTINUE action's "
    "continuation_token for more, or INCREASE_LIMIT."
)


class PgragServer(MCPServer[AppState]):
    """MCPServer with pgrag's error envelope for rejected arguments and database-backed
    resource listing."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        started = time.perf_counter()
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if cause is None and "Unknown tool" not in str(exc):
                raise
            detail: dict[str, Any] = {"tool": name}
            if cause is not None and hasattr(cause, "errors"):
                detail["errors"] = [
                    {"field": ".".join(str(p) for p in e["loc"]), "problem": e["msg"]}
                    for e in cause.errors()
                ]  # the values are the caller's, not echoed
                message = f"invalid arguments for {name}: " + "; ".join(
                    f"{d['field']}: {d['problem']}" for d in detail["errors"]
                )
            else:
                message = f"unknown tool '{name}': call tools/list for the available tools"
            return _error_result(InvalidArgument(message, detail=detail), started)

    async def _handle_list_resources(self, ctx: Any, params: Any) -> ListResourcesResult:
        cursor = getattr(params, "cursor", None) if params else None
        items, next_cursor = await list_document_resources(
            ctx.lifespan_context, current_scope(), cursor
        )
        static = [] if cursor else await self.list_resources()
        return ListResourcesResult(
            resources=static + [Resource(**i) for i in items], next_cursor=next_cursor
        )


def _error_result(exc: InvalidArgument, started: float) -> CallToolResult:
    trace = new_trace_id()
    return to_result(error_envelope(exc, trace), started)


@contextlib.asynccontextmanager
async def open_app_state(settings: Settings) -> AsyncIterator[AppState]:
    """Pool, provider and services for one server process."""
    async with open_runtime(settings, max_pool=20) as rt:
        async with rt.db.pool.connection() as conn:
            secret = (await (await conn.execute(search_sql.SECRET_SQL)).fetchone())[0]
        service = SearchService(
            rt.db.pool,
            rt.provider,
            max_snippets=settings.search_max_snippets,
            snippet_summary=settings.return_snippet_summary,
            default_content_mode=settings.default_content_mode,
        )
        yield AppState(
            settings=settings,
            pool=rt.db.pool,
            provider=rt.provider,
            search=service,
            codec=ContinuationCodec(secret.encode()),
        )


class SharedState:
    """The AppState the HTTP app opened, so MCP sessions and REST routes share one pool."""

    state: AppState | None = None


def build_server(settings: Settings, *, shared: SharedState | None = None) -> PgragServer:
    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer[AppState]) -> AsyncIterator[AppState]:
        if shared is not None and shared.state is not None:
            yield shared.state
            return
        async with open_app_state(settings) as state:
            yield state

    server = PgragServer(
        "pgrag",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        log_level=settings.log_level,
    )
    if "core" in settings.toolset_list:
        register_core(server)
    register_resources(server)
    return server
