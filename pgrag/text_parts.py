"""A long text in parts under the response cap, for every transport that hands out a
document's whole text (MCP's content resource, REST's content route): each part ends at a
line or word break when one is near, and the next part starts where it ended, so the parts
put together are the text exactly."""

from __future__ import annotations

from dataclasses import dataclass

from pgrag.paging import MAX_RESPONSE_BYTES, MAX_RESPONSE_TOKENS
from pgrag.tokens import encoding

NOTE_RESERVE = 500  # tokens and bytes kept for what a transport adds (MCP's next-part note)
PART_TOKENS = MAX_RESPONSE_TOKENS - NOTE_RESERVE
PART_BYTES = MAX_RESPONSE_BYTES - NOTE_RESERVE
WORD_BREAK_SPAN = 200  # characters searched back from a part's end for a line or word break
MAX_START_DIGITS = 12  # a start offset is a character count: 12 digits are plenty
MAX_START = 10**MAX_START_DIGITS - 1


@dataclass(frozen=True)
class TextPart:
    text: str
    start: int
    end: int  # where the next part starts
    total: int

    @property
    def rest(self) -> bool:
        return self.end < self.total


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
