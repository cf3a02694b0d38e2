"""Bounds on what one parsed document may cost the server that chunks, embeds and stores it.

The parsers' bounds (parsers/limits.py) and the worker's memory limit protect the parse
worker; what the worker hands back is held, embedded and written by the server. A 758-byte
ODS can repeat a 2,000-character row 20,000 times inside every parser bound: 40 MB of text
and 20,000 chunks. So a document's text and chunks are bounded, absolutely (the settings)
and relative to the file's size (a small file may expand only so far), checked in the worker
before chunking and again as its answer is read: past a bound the file fails TOO_LARGE.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pgrag.errors import ErrorCode
from pgrag.ingest.parsers.base import ParseError, Unit

# whatever its size, a file may give this much; beyond it, EXPANSION characters of text
# per byte of file and a chunk per CHUNK_BYTES bytes
FREE_CHARS = 4_000_000
FREE_CHUNKS = 1_000
EXPANSION = 100
CHUNK_BYTES = 10
# the worker's answer: its text about three times over (units, sheet rows, chunks), UTF-8,
# plus a little per chunk; a longer answer is refused before it is read
ANSWER_BYTES_PER_CHAR = 12
ANSWER_BYTES_PER_CHUNK = 2048
ANSWER_OVERHEAD_BYTES = 16 << 20


@dataclass(frozen=True)
class OutputLimits:
    max_chars: int = 64_000_000  # PGRAG_PARSE_MAX_CHARS
    max_chunks: int = 100_000  # PGRAG_PARSE_MAX_CHUNKS

    def chars_for(self, file_size: int) -> int:
        return min(self.max_chars, max(FREE_CHARS, EXPANSION * file_size))

    def chunks_for(self, file_size: int) -> int:
        return min(self.max_chunks, max(FREE_CHUNKS, file_size // CHUNK_BYTES))

    def answer_bytes(self) -> int:
        """The longest answer a worker may send (see ANSWER_BYTES_PER_CHAR)."""
        return (
            ANSWER_OVERHEAD_BYTES
            + ANSWER_BYTES_PER_CHAR * self.max_chars
            + ANSWER_BYTES_PER_CHUNK * self.max_chunks
        )

    def check_text(self, units: Sequence[Unit], file_size: int) -> None:
        """TOO_LARGE when the units' text is over the bound for a file of this size."""
        chars = sum(len(u.body) for u in units)
        limit = self.chars_for(file_size)
        if chars > limit:
            raise ParseError(
                ErrorCode.TOO_LARGE,
                f"the file extracts to {chars:,} characters of text; a {file_size:,}-byte "
                f"file may give at most {limit:,} ({_why(limit == self.max_chars, 'CHARS')})",
            )

    def check_chunks(self, chunks: int, file_size: int) -> None:
        limit = self.chunks_for(file_size)
        if chunks > limit:
            raise ParseError(
                ErrorCode.TOO_LARGE,
                f"the file makes more than {limit:,} chunks; a {file_size:,}-byte file may "
                f"make at most {limit:,} ({_why(limit == self.max_chunks, 'CHUNKS')})",
            )


def _why(absolute: bool, what: str) -> str:
    if absolute:
        return f"PGRAG_PARSE_MAX_{what}"
    return "a small file may expand only so far: docs/ingest-limits.md"


def answer_too_long(limit: int) -> ParseError:
    return ParseError(
        ErrorCode.TOO_LARGE,
        f"the parsed document is over {limit >> 20} MB: refused before it was read "
        "(PGRAG_PARSE_MAX_CHARS, PGRAG_PARSE_MAX_CHUNKS)",
    )
