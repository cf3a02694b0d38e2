"""Text from documents (file names, titles, sections, snippets) shown on a terminal or in a
log. A name can hold an escape sequence (ESC [ ... recolours or clears a terminal), a newline
(a fake log line) or a bidi override (RLO shows "invoice\u202etxt.md" as "invoicedm.txt"):
shown text has control and bidi characters as visible escapes. JSON output stays exact."""

from __future__ import annotations

import unicodedata

# bidirectional marks, embeddings, overrides and isolates: they reorder what a terminal shows
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def unsafe_char(ch: str) -> bool:
    """A control character or a bidi control: never shown raw, refused in upload names."""
    return unicodedata.category(ch) == "Cc" or ch in _BIDI


def printable(text: str) -> str:
    """`text` for logs and terminals: control and bidi characters as escapes (\\x1b)."""
    if not any(unsafe_char(ch) for ch in text):
        return text
    return "".join(
        ch.encode("unicode_escape").decode("ascii") if unsafe_char(ch) else ch for ch in text
    )
