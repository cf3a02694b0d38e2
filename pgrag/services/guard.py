"""One guard for every call that does work, whatever the transport: MCP tool calls, MCP
resource reads and listings, REST routes and console pages all run inside `guarded`. It
holds or refuses the caller past its share (admission.py), bounds the call in time, counts
it in the metrics and writes its audit row, so no transport can skip any of the four.

The audit row names the account the call is charged to: the key or OAuth grant, or for an
anonymous HTTP caller its address (`address:…`); stdio and the CLI are "local"."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pgrag.deadline import limited
from pgrag.errors import ErrorCode, as_pgrag_error, new_trace_id
from pgrag.metrics import count_call
from pgrag.services.audit import ToolCall, record_tool_call
from pgrag.services.context import AppContext
from pgrag.services.identity import current_account
from pgrag.store.backend_cpu import metering

ELIDE_KEYS = {"content", "text", "patch", "data", "key", "csrf", "queries"}
SUCCESS = "SUCCESS"
RESOURCES = "resources/"  # MCP resource calls are named by method: "resources/read document"


class Transport(StrEnum):
    MCP = "mcp"
    REST = "rest"
    CONSOLE = "console"


@dataclass
class Call:
    """One guarded call. A transport whose answer says more than SUCCESS (an MCP envelope's
    status, an error page) sets `outcome` and `label` inside the guard."""

    transport: Transport
    name: str  # the tool or resource, or the route: "GET /api/search"
    arguments: dict[str, Any]
    trace_id: str = field(default_factory=new_trace_id)
    outcome: str = SUCCESS  # the audit row's
    label: str = "ok"  # the metrics'
    ran_out: bool = False  # its own work passed its budget (admission charges its wall time)

    @property
    def is_tool(self) -> bool:
        return self.transport is Transport.MCP and not self.name.startswith(RESOURCES)

    def failed(self, code: str, *, ran_out: bool = False) -> None:
        self.outcome = self.label = code
        self.ran_out = self.ran_out or ran_out


@contextlib.asynccontextmanager
async def guarded(
    context: AppContext,
    call: Call,
    timeout: float,
    *,
    passthrough: tuple[type[Exception], ...] = (),
) -> AsyncIterator[Call]:
    """Admit the call (or raise RATE_LIMITED), run the block under `timeout`, then count and
    audit it. A failure leaves as its stable code (PgragError): TimeoutError is TIMEOUT.
    The transport's own refusals (`passthrough`: a request that fails validation, an HTTP
    error) are counted and leave unchanged, for the transport to answer.

    A call refused before it starts (RATE_LIMITED) is counted, not audited: a refusal costs
    the server next to nothing, and a flood of them must not cost it a row each."""
    started = time.perf_counter()
    account = current_account()
    ran = False
    try:
        with metering() as cpu:
            async with (
                context.admission.admitted(account, cpu.seconds, lambda: call.ran_out),
                limited(timeout),
            ):
                ran = True
                yield call
    except passthrough as exc:
        status = getattr(exc, "status_code", None)
        call.failed(f"HTTP_{status}" if status else str(ErrorCode.INVALID_ARGUMENT))
        raise
    except Exception as exc:
        error = as_pgrag_error(exc, call.trace_id)
        call.failed(str(error.code))
        if error is exc:
            raise
        raise error from exc
    finally:
        count_call(str(call.transport), call.name, call.label, tool=call.is_tool)
        if ran:
            row = ToolCall(
                call.name,
                audit_arguments(call.arguments),
                account,
                round((time.perf_counter() - started) * 1000, 2),
                call.outcome,
                call.trace_id,
            )
            await record_tool_call(context.pool, row)


def audit_arguments(args: dict[str, Any]) -> dict[str, Any]:
    """What was asked, not the payload: content and long values are elided, and NUL
    characters replaced (PostgreSQL's jsonb cannot store one; the call is audited all the
    same)."""
    return {str(_sanitised(k)): _sanitised(_elided(k, v)) for k, v in args.items()}


def _elided(key: str, value: Any) -> Any:
    if key in ELIDE_KEYS and isinstance(value, str | list | dict):
        return f"<{len(value)} {'chars' if isinstance(value, str) else 'items'}>"
    if isinstance(value, str) and len(value) > 500:
        return value[:500] + "…"
    if isinstance(value, list) and len(value) > 50:
        return f"<{len(value)} items>"
    return value


def _sanitised(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, list):
        return [_sanitised(v) for v in value]
    if isinstance(value, dict):
        return {_sanitised(k): _sanitised(v) for k, v in value.items()}
    return value
