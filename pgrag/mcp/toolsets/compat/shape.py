"""The compatibility answer shape: the tool's own payload as structuredContent and as JSON
text (cut to the response cap); failures are `isError` results with LDIMS's error body
`{isError, errorCode, errorMessage, errorDetails}` whose `errorCode` is pgrag's stable code."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.types import CallToolResult, TextContent

from pgrag.errors import PgragError
from pgrag.mcp.answer_cap import cap_payload
from pgrag.mcp.app_state import tool_call

Answer = tuple[CallToolResult, str]  # (the result, the audit outcome)


def compat_result(payload: dict[str, Any], *, is_error: bool = False) -> CallToolResult:
    """The payload as structuredContent and as JSON text, cut to the response cap."""
    capped = cap_payload(payload)
    return CallToolResult(
        content=[TextContent(type="text", text=capped.text)],
        structured_content=capped.payload,
        is_error=is_error,
    )


def compat_error(exc: PgragError, trace_id: str) -> dict[str, Any]:
    """LDIMS's error body carrying pgrag's stable code."""
    return {
        "isError": True,
        "errorCode": str(exc.code),
        "errorMessage": exc.message,
        "errorDetails": {**exc.detail, "traceId": trace_id},
    }


class CompatShape:
    """Bodies return the payload dict; the audit outcome is SUCCESS or the error code."""

    def success(self, value: dict[str, Any], trace_id: str) -> Answer:
        return compat_result(value), "SUCCESS"

    def failure(self, error: PgragError, trace_id: str) -> Answer:
        return compat_result(compat_error(error, trace_id), is_error=True), str(error.code)

    def result(self, answer: Answer, started: float) -> tuple[CallToolResult, str, str]:
        result, outcome = answer
        return result, outcome, "ok" if outcome == "SUCCESS" else outcome


COMPAT = CompatShape()


def compat_tool(
    timeout: float, *, name: str | None = None
) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[CallToolResult]]]:
    """`tool_call` answering in the compatibility shape. The body returns a dict; its return
    annotation is what the SDK publishes (the wrapper's CallToolResult), hence `Any` here."""
    return tool_call(COMPAT, timeout, name=name)
