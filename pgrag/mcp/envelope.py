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

from pgrag.errors import ErrorBody, PgragError
from pgrag.mcp.answer_cap import cap_payload
from pgrag.paging import MAX_RESPONSE_TOKENS, Continuation

T = TypeVar("T")


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


def _mark_truncated(payload: dict[str, Any]) -> None:
    payload["meta"]["truncated"] = True


def to_result(envelope: Envelope[Any], started: float) -> CallToolResult:
    envelope.meta.took_ms = round((time.perf_counter() - started) * 1000, 2)
    capped = cap_payload(envelope.model_dump(mode="json"), _mark_truncated)
    payload = capped.payload
    payload["meta"]["token_count"] = capped.tokens
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
        error=exc.body(),
        status=Status(code="error", message=str(exc.code)),
        meta=Meta(trace_id=trace_id),
    )
