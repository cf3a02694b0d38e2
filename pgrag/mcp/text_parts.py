"""A document's text read through a resource, one part at a time (pgrag.text_parts).
resources/read has no cursor, so a text over the response cap comes as its first part
followed by a note that names the URI of the next part (`?start=` the character where it
begins)."""

from __future__ import annotations

from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from pgrag.errors import ErrorCode
from pgrag.paging import MAX_RESPONSE_TOKENS
from pgrag.text_parts import MAX_START_DIGITS, TextPart


def parse_start(value: str | None, uri: str) -> int:
    """The `start` of a content URI: a character offset, 0 when omitted."""
    if value is None or value == "":
        return 0
    if not (value.isascii() and value.isdigit()) or len(value) > MAX_START_DIGITS:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"start must be a character offset (a whole number), not {value[:40]!r}",
            data={"code": str(ErrorCode.INVALID_ARGUMENT), "uri": uri, "field": "start"},
        )
    return int(value)


def with_note(part: TextPart, next_uri: str) -> str:
    """The part, and when the text goes on, a last line saying where the rest is."""
    if not part.rest:
        return part.text
    return (
        f"{part.text}\n\n[pgrag: characters {part.start:,}-{part.end:,} of {part.total:,}; "
        f"this answer is capped at {MAX_RESPONSE_TOKENS:,} tokens. Read {next_uri} for the "
        "next part, or page the text with get_document_data.]"
    )
