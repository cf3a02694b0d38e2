"""The response cap, absolute: whatever a tool builds, the JSON it sends stays within
MAX_RESPONSE_TOKENS and MAX_RESPONSE_BYTES.

Tools page their data below the cap; this is the backstop for what paging cannot split
(one cell of megabytes, thousands of sheet names): long strings are cut first, then long
lists and objects, until the answer fits. A text over the byte cap is never tokenised, so
the cost of a huge answer is a few `json.dumps`, not a tokenizer pass over megabytes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pgrag.paging import MAX_RESPONSE_BYTES, MAX_RESPONSE_TOKENS
from pgrag.tokens import count_json_tokens

FIRST_STRING_CUT = 20_000  # characters; halved while the answer is over the cap
LAST_STRING_CUT = 200
FIRST_LIST_CUT = 4096  # items; halved down to one
TRUNCATION_MARK = " …[truncated]"
SLACK = 32  # tokens and bytes for the fields filled in after the cut (took_ms, token_count)


@dataclass(frozen=True)
class Capped:
    payload: Any
    text: str
    tokens: int
    truncated: bool


def _tokens_within_cap(text: str) -> int | None:
    """The text's tokens, or None when it is over the cap."""
    if len(text.encode()) > MAX_RESPONSE_BYTES - SLACK:
        return None
    tokens = count_json_tokens(text)
    return tokens if tokens <= MAX_RESPONSE_TOKENS - SLACK else None


def shrink_strings(value: Any, limit: int) -> Any:
    """Cut every string longer than `limit` characters."""
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + TRUNCATION_MARK
    if isinstance(value, list):
        return [shrink_strings(v, limit) for v in value]
    if isinstance(value, dict):
        return {k: shrink_strings(v, limit) for k, v in value.items()}
    return value


def shrink_lists(value: Any, limit: int) -> Any:
    """Keep the first `limit` items of every list and object."""
    if isinstance(value, list):
        return [shrink_lists(v, limit) for v in value[:limit]]
    if isinstance(value, dict):
        return {k: shrink_lists(v, limit) for k, v in list(value.items())[:limit]}
    return value


def _cuts() -> Iterator[tuple[int, int | None]]:
    """(string limit, list limit) from the mildest cut to the harshest."""
    strings = FIRST_STRING_CUT
    while strings >= LAST_STRING_CUT:
        yield strings, None
        strings //= 2
    lists = FIRST_LIST_CUT
    while lists >= 1:
        yield LAST_STRING_CUT, lists
        lists //= 2


def cap_payload(payload: Any, mark: Callable[[Any], None] | None = None) -> Capped:
    """`payload` as JSON text within the cap. `mark(payload)` flags a payload that was cut
    (e.g. sets the envelope's `meta.truncated`)."""
    text = json.dumps(payload, ensure_ascii=False)
    tokens = _tokens_within_cap(text)
    if tokens is not None:
        return Capped(payload, text, tokens, False)
    cut = payload
    for strings, lists in _cuts():
        cut = shrink_strings(payload, strings)
        if lists is not None:
            cut = shrink_lists(cut, lists)
        if mark is not None:
            mark(cut)
        text = json.dumps(cut, ensure_ascii=False)
        tokens = _tokens_within_cap(text)
        if tokens is not None:
            break
    return Capped(cut, text, count_json_tokens(text) if tokens is None else tokens, True)
