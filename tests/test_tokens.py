"""count_json_tokens splits JSON at `, "` and caches piece counts; it must equal the
tokenizer's count of the whole text for any text, or budgets and the response cap drift."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pgrag.tokens import count_json_tokens, count_tokens

# characters around the cut that could move the tokenizer's pieces if the cut were wrong
TRICKY = st.sampled_from(
    [', "', ",", '"', " ", "  ", "\n", "\r\n", "\t", "\u00a0", "\u3000", "'s", "'LL", "12345",
     "中文", "😀", "é", "{", "}", ":", "\\", "\\n", "ab", "The", "!?", ",\n\""]
)  # fmt: skip


@given(st.lists(TRICKY, max_size=40).map("".join))
def test_piecewise_count_equals_the_whole_text_count(text: str) -> None:
    assert count_json_tokens(text) == count_tokens(text)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.lists(TRICKY).map("".join),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


@given(JSON_VALUES, st.booleans())
def test_json_documents_count_exactly_twice_in_a_row(value: Any, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    expected = count_tokens(text)
    assert count_json_tokens(text) == expected
    assert count_json_tokens(text) == expected  # the second time from cached pieces


def test_a_piece_longer_than_the_cache_limit_is_counted_too() -> None:
    text = json.dumps({"a": "word " * 2000, "b": [1, 2, 3], "c": 'x, "y"'})
    assert count_json_tokens(text) == count_tokens(text) > 2000
