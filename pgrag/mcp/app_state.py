"""What is MCP-specific about a tool call: the context a tool's `ctx` carries, and the
wrapper that runs a tool body as a guarded call (admission, time limit, metrics and audit:
pgrag/services/guard.py) and makes its answer. The context
itself, the read-only rule and the time limits live in pgrag/services/context.py."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, ParamSpec, Protocol, TypeVar, cast

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult

from pgrag.errors import Forbidden, PgragError
from pgrag.jsonable import jsonable
from pgrag.mcp.envelope import Envelope, error_envelope, to_result
from pgrag.services.context import DEFAULT_TIMEOUT_S, AppContext, read_only
from pgrag.services.guard import Call, Transport, guarded
from pgrag.services.identity import current_caller, current_scope, may_write

P = ParamSpec("P")
V = TypeVar("V")
V_in = TypeVar("V_in", contravariant=True)
A = TypeVar("A")

_current_tool: ContextVar[str] = ContextVar("pgrag_current_tool")


def current_tool() -> str:
    """The name of the tool whose body is running (set by `tool_call`)."""
    return _current_tool.get()


def state_of(ctx: Context[Any, Any]) -> AppContext:
    return cast(AppContext, ctx.request_context.lifespan_context)


def scope_of(ctx: Context[Any, Any]) -> list[str] | None:
    """Collections the caller may read (None = all). Set by the HTTP auth layer."""
    return current_scope()


def caller_of(ctx: Context[Any, Any]) -> str:
    return current_caller()


def require_writable(state: AppContext, ctx: Context[Any, Any] | None = None) -> None:
    """Refuse a write tool on a read-only server (PGRAG_READ_ONLY; unset, remote calls are
    read-only).

    The call is remote when the transport attached its HTTP request to the context or the
    HTTP auth layer named the caller (stdio callers are "local"); the rule is read_only's."""
    request = getattr(getattr(ctx, "request_context", None), "request", None)
    remote = request is not None or caller_of(ctx) != "local"  # type: ignore[arg-type]
    if read_only(state.settings, remote=remote):
        raise Forbidden(
            "this server is read-only: write tools are refused. Start it with "
            "PGRAG_READ_ONLY=false (or --read-only false) to allow changes"
        )
    if not may_write():
        raise Forbidden(
            "this token was granted read access only (scope pgrag:write missing): approve "
            "the client again with write access",
            detail={"error": "insufficient_scope", "scope": "pgrag:write"},
        )


def require_unscoped(ctx: Context[Any, Any], reason: str) -> None:
    """Refuse data that row-level security cannot limit to collections to a key that is
    limited to collections: out-of-scope reads are FORBIDDEN, and such data may
    describe any collection. `reason` says why the data is not scoped."""
    scope = scope_of(ctx)
    if scope is not None:
        raise Forbidden(
            f"{reason}, and this key may only read the collections {', '.join(scope)}: "
            "use an API key without a collection scope",
            detail={"scope": scope},
        )


class ResultShape(Protocol[V_in, A]):
    """How a tool body's value and its failures become the tool's answer: pgrag's envelope
    (`ENVELOPE`) or a compatibility toolset's own shape."""

    def success(self, value: V_in, trace_id: str) -> A:
        """The answer for a body that returned `value` (an error raised here is the tool's)."""
        ...

    def failure(self, error: PgragError, trace_id: str) -> A:
        """The answer for a body that failed with `error` (already a stable code)."""
        ...

    def result(self, answer: A, started: float) -> tuple[CallToolResult, str, str]:
        """(the result sent, the audit row's outcome, the metrics label)."""
        ...


class EnvelopeShape:
    """pgrag's own tools: the body returns an Envelope; failures are error envelopes."""

    def success(self, value: Envelope[Any], trace_id: str) -> Envelope[Any]:
        value.meta.trace_id = trace_id
        return value

    def failure(self, error: PgragError, trace_id: str) -> Envelope[Any]:
        return error_envelope(error, trace_id)

    def result(self, answer: Envelope[Any], started: float) -> tuple[CallToolResult, str, str]:
        outcome = str(answer.error.code) if answer.error else answer.status.message
        label = str(answer.error.code) if answer.error else "ok"
        return to_result(answer, started), outcome, label


ENVELOPE = EnvelopeShape()


def tool_call(
    shape: ResultShape[V, A], timeout: float = DEFAULT_TIMEOUT_S, *, name: str | None = None
) -> Callable[[Callable[..., Awaitable[V]]], Callable[..., Awaitable[CallToolResult]]]:
    """Run a tool body under a timeout, map every failure to a stable code, count and audit
    the call; `shape` makes the answer (the body's keyword `ctx` is the MCP context). The
    tool is named after the body unless `name` says otherwise."""

    def decorate(body: Callable[..., Awaitable[V]]) -> Callable[..., Awaitable[CallToolResult]]:
        tool = name or body.__name__

        @functools.wraps(body)
        async def wrapper(*args: Any, **kwargs: Any) -> CallToolResult:
            started = time.perf_counter()
            ctx: Context[Any, Any] = kwargs["ctx"]
            arguments = jsonable({k: v for k, v in kwargs.items() if k != "ctx"})
            call = Call(Transport.MCP, tool, arguments)
            running = _current_tool.set(tool)
            try:
                async with guarded(state_of(ctx), call, timeout):
                    value = await body(*args, **kwargs)
                    answer = shape.success(value, call.trace_id)
                    result, call.outcome, call.label = shape.result(answer, started)
            except PgragError as error:  # the guard gave every failure its stable code
                result, _, _ = shape.result(shape.failure(error, call.trace_id), started)
            finally:
                _current_tool.reset(running)
            return result

        setattr(wrapper, TOOL_NAME, tool)  # what a toolset's discovery looks for
        return wrapper

    return decorate


TOOL_NAME = "__pgrag_tool__"


def tool_name(obj: object) -> str | None:
    """The tool a `tool_call` handler answers as, None for anything else."""
    name = getattr(obj, TOOL_NAME, None)
    return name if isinstance(name, str) else None


def enveloped(
    timeout: float = DEFAULT_TIMEOUT_S,
) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[CallToolResult]]]:
    """`tool_call` answering in pgrag's envelope. The body returns an Envelope; its return
    annotation is what the SDK publishes (the wrapper's CallToolResult and output schema),
    hence `Any` here."""
    return tool_call(ENVELOPE, timeout)
