"""The pgrag MCP server: lifespan (pool, provider, services), toolsets, resources."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from mcp.server import MCPServer
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolResult,
    ListResourcesResult,
    Resource,
    ServerCapabilities,
    Tool,
)

from pgrag import __version__
from pgrag.errors import ErrorCode, InvalidArgument, new_trace_id
from pgrag.mcp import sdk
from pgrag.mcp.envelope import error_envelope, to_result
from pgrag.mcp.notify import running_relay
from pgrag.mcp.output_schema import compact_schema
from pgrag.mcp.resources import list_document_resources, register_resources
from pgrag.mcp.toolsets import register_toolsets
from pgrag.services.context import AppContext, SharedContext, open_context
from pgrag.services.identity import current_scope, may_write
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


class PgragServer(MCPServer[AppContext]):
    """MCPServer with pgrag's error envelope for rejected arguments and database-backed
    resource listing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._compact_schemas: dict[str, dict[str, Any]] = {}
        # pgrag has no prompts: not advertised, and prompts/* answer -32601 (method not found)
        for method in ("prompts/list", "prompts/get"):
            sdk.drop_request_handler(self, method)
        low = sdk.lowlevel(self)
        low.get_capabilities = _truthful_capabilities(low.get_capabilities)  # type: ignore[method-assign]
        self.middleware.append(_ProtocolChecks())

    async def write_tools(self) -> frozenset[str]:
        """The tools that change data (not annotated read-only): a token granted read
        access neither sees them listed nor reaches them (pgrag/http/mcp_mode.py)."""
        tools = await super().list_tools()
        return frozenset(t.name for t in tools if not _reads_only(t))

    async def list_tools(self) -> list[Tool]:
        """Output schemas published self-contained and cheap to validate (output_schema.py);
        results are still validated server-side against the pydantic models."""
        tools = await super().list_tools()
        if not may_write():
            tools = [t for t in tools if _reads_only(t)]
        for tool in tools:
            if tool.output_schema is not None:
                if tool.name not in self._compact_schemas:
                    self._compact_schemas[tool.name] = compact_schema(tool.output_schema)
                tool.output_schema = self._compact_schemas[tool.name]
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        started = time.perf_counter()
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if sdk.is_unknown_tool(exc):
                # the spec's answer to a tool that does not exist: a protocol error, not a
                # failed execution (those keep the envelope with isError)
                raise MCPError(
                    code=INVALID_PARAMS,
                    message=f"Unknown tool: {name}: call tools/list for the available tools",
                    data={"code": str(ErrorCode.INVALID_ARGUMENT), "tool": name},
                ) from None
            if cause is None:
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
                message = f"invalid arguments for {name}: {cause}"
            return _error_result(InvalidArgument(message, detail=detail), started)

    async def _handle_read_resource(self, ctx: Any, params: Any) -> Any:
        """Resource errors carry the stable code in error.data, like tool envelopes do."""
        try:
            return await super()._handle_read_resource(ctx, params)
        except MCPError as exc:
            data = dict(exc.error.data) if isinstance(exc.error.data, dict) else {}
            if "code" not in data:
                found = exc.error.code == INVALID_PARAMS
                data["code"] = str(ErrorCode.NOT_FOUND if found else ErrorCode.INTERNAL)
            raise MCPError(code=exc.error.code, message=exc.error.message, data=data) from None

    async def _handle_list_resources(self, ctx: Any, params: Any) -> ListResourcesResult:
        cursor = getattr(params, "cursor", None) if params else None
        items, next_cursor = await list_document_resources(
            ctx.lifespan_context, current_scope(), cursor
        )
        static = [] if cursor else await self.list_resources()
        return ListResourcesResult(
            resources=static + [Resource(**i) for i in items], next_cursor=next_cursor
        )


UNPAGED_LISTS = {"tools/list", "resources/templates/list"}


class _ProtocolChecks:
    """Runs before every request's handler, on every transport."""

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        if ctx.method == "initialize":
            # handshake-era sessions get list_changed on their own channel from the start,
            # whatever they call (2026-07-28 clients subscribe with subscriptions/listen)
            with contextlib.suppress(Exception):
                ctx.lifespan_context.relay.remember(ctx.session)
        params = ctx.params if isinstance(ctx.params, dict) else {}
        if ctx.method in UNPAGED_LISTS and params.get("cursor") is not None:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"invalid cursor: {ctx.method} has a single page, call it without one",
                data={"code": str(ErrorCode.INVALID_ARGUMENT), "field": "cursor"},
            )
        return await call_next(ctx)


def _truthful_capabilities(get: Callable[..., ServerCapabilities]) -> Callable[..., Any]:
    """Advertise what is sent: documents changing send resources list_changed (notify.py);
    the tool list never changes while the server runs."""

    def capabilities(
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> ServerCapabilities:
        caps = get(
            NotificationOptions(resources_changed=True),
            experimental_capabilities,
            extensions,
            protocol_version=protocol_version,
        )
        if caps.tools is not None:
            caps.tools.list_changed = False
        return caps

    return capabilities


def _reads_only(tool: Tool) -> bool:
    return tool.annotations is not None and tool.annotations.read_only_hint is True


def _error_result(exc: InvalidArgument, started: float) -> CallToolResult:
    trace = new_trace_id()
    return to_result(error_envelope(exc, trace), started)


def build_server(
    settings: Settings, *, shared: SharedContext | None = None, watch: list[Path] | None = None
) -> PgragServer:
    """The MCP server; with `shared`, its sessions use the context the HTTP app opened."""

    @contextlib.asynccontextmanager
    async def lifespan(server: MCPServer[AppContext]) -> AsyncIterator[AppContext]:
        if shared is not None and shared.context is not None:
            shared.context.relay.bus = sdk.subscription_bus(server)
            yield shared.context
            return
        async with open_context(settings, relay=running_relay, watch=watch) as context:
            context.relay.bus = sdk.subscription_bus(server)
            yield context

    server = PgragServer(
        "pgrag",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        log_level=settings.log_level,
    )
    register_toolsets(server, settings.toolset_list)
    register_resources(server)
    return server
