"""A document's text read through a resource, one part at a time. resources/read has no
cursor, so a text over the response cap comes as its first part followed by a note that
names the URI of the next part (`?start=` the character where it begins)."""

from __future__ import annotations

from dataclasses import dataclass

from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from pgrag.errors import ErrorCode
from pgrag.paging import MAX_RESPONSE_BYTES, MAX_RESPONSE_TOKENS
from pgrag.tokens import encoding

NOTE_RESERVE = 500  # tokens and bytes kept for the note after a part
PART_TOKENS = MAX_RESPONSE_TOKENS - NOTE_RESERVE
PART_BYTES = MAX_RESPONSE_BYTES - NOTE_RESERVE
WORD_BREAK_SPAN = 200  # characters searched back from a part's end for a line or word break


@dataclass(frozen=True)
class TextPart:
    text: str
    start: int
    end: int  # where the next part starts
    total: int

    @property
    def rest(self) -> bool:
        return self.end < self.total


def parse_start(value: str | None, uri: str) -> int:
    """The `start` of a content URI: a character offset, 0 when omitted."""
    if value is None or value == "":
        return 0
    if not (value.isascii() and value.isdigit()) or len(value) > 12:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"start must be a character offset (a whole number), not {value[:40]!r}",
            data={"code": str(ErrorCode.INVALID_ARGUMENT), "uri": uri, "field": "start"},
        )
    return int(value)


def text_part(text: str, start: int) -> TextPart:
    """The part of `text` from `start` within PART_BYTES and PART_TOKENS, ending at a line or
    word break when one is near."""
    start = min(start, len(text))
    part = text[start : start + PART_BYTES]  # a character is at least one byte
    raw = part.encode()
    if len(raw) > PART_BYTES:
        part = raw[:PART_BYTES].decode("utf-8", "ignore")
    tokens = encoding().encode_ordinary(part)
    if len(tokens) > PART_TOKENS:
        part = encoding().decode(tokens[:PART_TOKENS]).rstrip("\ufffd")
    if start + len(part) < len(text):
        brk = max(part.rfind("\n", -WORD_BREAK_SPAN), part.rfind(" ", -WORD_BREAK_SPAN))
        if brk > 0:
            part = part[: brk + 1]
    return TextPart(part, start, start + len(part), len(text))


def with_note(part: TextPart, next_uri: str) -> str:
    """The part, and when the text goes on, a last line saying where the rest is."""
    if not part.rest:
        return part.text
    return (
        f"{part.text}\n\n[pgrag: characters {part.start:,}-{part.end:,} of {part.total:,}; "
        f"this answer is capped at {MAX_RESPONSE_TOKENS:,} tokens. Read {next_uri} for the "
        "next part, or page the text with get_document_data.]"
    )
