"""A paged tool call: which page a continuation token asks for, the cut of the items to the
token budget, and the envelope's paging fields (status, continuation, actions)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from mcp.server.mcpserver import Context
from pydantic import BaseModel

from pgrag.mcp.app_state import current_tool, scope_of, state_of
from pgrag.mcp.envelope import Envelope, page_actions, page_status
from pgrag.paging import (
    Continuation,
    fingerprint,
    fit_to_budget,
    item_tokens,
    page_budget,
)
from pgrag.services.context import AppContext
from pgrag.tokens import count_json_tokens

T = TypeVar("T")
D = TypeVar("D", bound=BaseModel)


def json_tokens(value: Any) -> int:
    """Tokens a value costs as it is sent: JSON-encoded (quotes, escapes, list commas)."""
    return count_json_tokens(json.dumps(value, ensure_ascii=False))


def model_tokens(model: BaseModel) -> int:
    return item_tokens(model.model_dump(mode="json"))


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    tokens: int
    has_more: bool
    token: str | None
    first_exceeded: bool
    max_tokens: int

    def envelope(self, data: D, done_message: str = "SUCCESS") -> Envelope[D]:
        return Envelope[type(data)](  # type: ignore[misc,operator,no-any-return]
            data=data,
            status=page_status(self.has_more, self.first_exceeded, done_message),
            continuation=Continuation(has_more=self.has_more, token=self.token),
            actions=page_actions(self.token, self.max_tokens, self.first_exceeded),
        )


@dataclass(frozen=True)
class PagedCall:
    """The continuation token is bound to the tool, its arguments and the key's scope (the
    fingerprint), so a token only continues the request that produced it."""

    state: AppContext
    tool: str
    fp: str
    offset: int
    position: dict[str, Any] = field(default_factory=dict)  # the token's whole state

    @classmethod
    def of(cls, ctx: Context[Any, Any], token: str | None, *request: Any) -> PagedCall:
        """The call of the running tool, continuing `token` if one was given; `request`: the
        arguments the token is bound to."""
        state, tool = state_of(ctx), current_tool()
        fp = fingerprint([tool, *request, scope_of(ctx)])
        position = state.codec.decode(token, tool, fp) if token else {}
        return cls(state, tool, fp, int(position.get("o", 0)), position)

    def resume_at(self, page: Page[T], position: dict[str, Any]) -> Page[T]:
        """`page`, continued at `position` rather than where its items end."""
        token = self.state.codec.encode(self.tool, self.fp, position)
        return replace(page, has_more=True, token=token)

    def cut(
        self,
        items: Sequence[T],
        total: int,
        max_tokens: int,
        measure: Callable[[T], int] = json_tokens,
        extra: dict[str, Any] | None = None,
        spent: int = 0,
    ) -> Page[T]:
        """Cut `items` (which start at this call's offset of `total`) to the page budget. `spent`
        tokens of the page's other data count against the budget; `extra` rides along in
        the continuation token."""
        budget = page_budget(max_tokens) - spent
        fit = fit_to_budget(items, budget, measure)
        kept = list(items[: fit.count])
        next_offset = self.offset + len(kept)
        has_more = next_offset < total
        token = (
            self.state.codec.encode(self.tool, self.fp, {**(extra or {}), "o": next_offset})
            if has_more
            else None
        )
        return Page(kept, spent + fit.tokens, has_more, token, fit.first_exceeded, max_tokens)
