"""The response envelope of every pgrag tool.

Success and failure share one shape so an agent can branch on `ok` and act on
`error.code` / `actions`. Tools return a `CallToolResult` with the envelope as
`structuredContent` and the same JSON as text, `isError` set on failures.
"""

from __future__ import annotations

import json
import time
from typing import Any, Generic, Literal, TypeVar

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from pgrag.errors import PgragError
from pgrag.paging import Continuation
from pgrag.tokens import count_json_tokens

T = TypeVar("T")

MAX_RESPONSE_TOKENS = 25_000  # a common client cap: no response may exceed it
MAX_RESPONSE_BYTES = 200_000  # and no response over 200 kB, whatever its token count


class Status(BaseModel):
    code: Literal["success", "partial_success", "error"] = "success"
    message: str = "SUCCESS"


class Action(BaseModel):
    id: str
    description: str
    params: dict[str, Any] = Field(default_factory=dict)


class Meta(BaseModel):
    took_ms: float = 0.0
    token_count: int = 0
    trace_id: str = ""
    truncated: bool = False


class ErrorBody(BaseModel):
    code: str
    message: str
    detail: dict[str, Any] = Field(default_factory=dict)


class Envelope(BaseModel, Generic[T]):
    ok: bool = True
    data: T | None = None
    error: ErrorBody | None = None
    status: Status = Field(default_factory=Status)
    continuation: Continuation = Field(default_factory=Continuation)
    actions: list[Action] = Field(default_factory=list)
    meta: Meta = Field(default_factory=Meta)


def page_actions(next_token: str | None, max_tokens: int, first_exceeded: bool) -> list[Action]:
    actions = []
    if next_token:
        actions.append(
            Action(
                id="CONTINUE",
                description="Get the next page with the same arguments",
                params={"continuation_token": next_token},
            )
        )
    if first_exceeded or next_token:
        actions.append(
            Action(
                id="INCREASE_LIMIT",
                description="Retry with a higher token limit",
                params={"max_tokens": min(max_tokens * 2, MAX_RESPONSE_TOKENS)},
            )
        )
    return actions


def page_status(has_more: bool, first_exceeded: bool, done_message: str = "SUCCESS") -> Status:
    if first_exceeded:
        return Status(code="partial_success", message="TOKEN_LIMIT_EXCEEDED_BUT_INCLUDED")
    if has_more:
        return Status(code="success", message="TOKEN_LIMIT_REACHED")
    return Status(code="success", message=done_message)


def _shrink(value: Any, limit: int) -> Any:
    """Cut every string longer than `limit` characters (the response cap is absolute)."""
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + " …[truncated]"
    if isinstance(value, list):
        return [_shrink(v, limit) for v in value]
    if isinstance(value, dict):
        return {k: _shrink(v, limit) for k, v in value.items()}
    return value


def to_result(envelope: Envelope[Any], started: float) -> CallToolResult:
    envelope.meta.took_ms = round((time.perf_counter() - started) * 1000, 2)
    payload = envelope.model_dump(mode="json")
    text = json.dumps(payload, ensure_ascii=False)
    tokens = count_json_tokens(text)
    limit = 20_000
    while (tokens > MAX_RESPONSE_TOKENS or len(text.encode()) > MAX_RESPONSE_BYTES) and limit > 200:
        payload = _shrink(payload, limit)
        payload["meta"]["truncated"] = True
        text = json.dumps(payload, ensure_ascii=False)
        tokens = count_json_tokens(text)
        limit //= 2
    payload["meta"]["token_count"] = tokens
    text = json.dumps(payload, ensure_ascii=False)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=payload,
        is_error=not envelope.ok,
    )


def error_envelope(exc: PgragError, trace_id: str) -> Envelope[Any]:
    return Envelope(
        ok=False,
        data=None,
        error=ErrorBody(code=str(exc.code), message=exc.message, detail=exc.detail),
        status=Status(code="error", message=str(exc.code)),
        meta=Meta(trace_id=trace_id),
    )
