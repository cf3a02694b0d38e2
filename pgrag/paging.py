"""Token-bounded pages and signed continuation tokens: no answer exceeds its token budget,
and a client resumes a page it cannot forge.

A token is `base64url(json).base64url(hmac)`: opaque to clients, signed with the database's
secret (pgrag.server_secret) so every server process accepts the others' tokens, and bound
to the request it continues (tool + a fingerprint of the arguments) so it cannot be
replayed against another query or another caller's scope.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from pgrag.errors import InvalidArgument
from pgrag.tokens import count_json_tokens, count_tokens

T = TypeVar("T")

TOKEN_VERSION = 1
MAX_RESPONSE_TOKENS = 25_000  # a common client cap: no answer may exceed it
MAX_RESPONSE_BYTES = 200_000  # and no answer over 200 kB, whatever its token count
ENVELOPE_RESERVE = 1000  # tokens kept for the envelope around a page's data (ids, actions, meta)


def page_budget(max_tokens: int) -> int:
    """Tokens a page's data may take: the caller's budget, never more than the cap allows
    (a page cut by the cap would lose what its continuation then skips)."""
    return min(max_tokens, MAX_RESPONSE_TOKENS - ENVELOPE_RESERVE)


class Continuation(BaseModel):
    """Whether a paged answer has more, and the token that asks for it (MCP envelopes and
    REST answers alike)."""

    has_more: bool = False
    token: str | None = None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def fingerprint(args: Any) -> str:
    """A stable digest of the arguments a continuation must repeat."""
    canonical = json.dumps(args, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class ContinuationCodec:
    secret: bytes

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self.secret, payload, hashlib.sha256).digest()[:18]

    def encode(self, tool: str, fp: str, state: dict[str, Any]) -> str:
        payload = json.dumps(
            {"v": TOKEN_VERSION, "t": tool, "f": fp, "s": state}, separators=(",", ":")
        ).encode()
        return f"{_b64(payload)}.{_b64(self._sign(payload))}"

    def decode(self, token: str, tool: str, fp: str) -> dict[str, Any]:
        try:
            body, sig = token.split(".", 1)
            payload = _unb64(body)
            ok = hmac.compare_digest(_unb64(sig), self._sign(payload))
            data = json.loads(payload) if ok else None
        except (ValueError, UnicodeDecodeError):
            data = None
        if not isinstance(data, dict) or data.get("v") != TOKEN_VERSION:
            raise InvalidArgument(
                "continuation_token is invalid or was modified: repeat the request without it "
                "to start from the first page",
                detail={"field": "continuation_token"},
            )
        if data.get("t") != tool or data.get("f") != fp:
            raise InvalidArgument(
                "continuation_token belongs to a different request: continue with the same "
                "arguments that produced it, or omit it to start over",
                detail={"field": "continuation_token"},
            )
        state = data.get("s")
        if not isinstance(state, dict):
            raise InvalidArgument(
                "continuation_token is invalid", detail={"field": "continuation_token"}
            )
        return state


def item_tokens(item: Any) -> int:
    """Tokens an item costs in the JSON an agent reads."""
    if isinstance(item, str):
        return count_tokens(item)
    return count_json_tokens(json.dumps(item, ensure_ascii=False, default=str))


@dataclass(frozen=True)
class Budgeted:
    count: int  # how many of the items fit (at least one when there are any)
    tokens: int
    first_exceeded: bool  # the first item alone is over the budget but was included


def fit_to_budget(items: Sequence[T], max_tokens: int, measure: Callable[[T], int]) -> Budgeted:
    total = 0
    for i, item in enumerate(items):
        cost = measure(item)
        if i > 0 and total + cost > max_tokens:
            return Budgeted(i, total, False)
        total += cost
        if i == 0 and cost > max_tokens:
            return Budgeted(1, total, True)
    return Budgeted(len(items), total, False)
