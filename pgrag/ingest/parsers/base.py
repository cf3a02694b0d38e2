"""What every parser returns: the document's structural units plus metadata and outline."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, BinaryIO, Literal

from pgrag.errors import ErrorCode

UnitKind = Literal["page", "sheet", "slide", "section", "text"]


@dataclass
class Unit:
    """A page, sheet, slide or section. `body` is its extracted text: chunk offsets point
    into it, so it must be exactly what `get_pages`/`get_slides`/... return."""

    kind: UnitKind
    number: int  # 1-based
    body: str
    title: str | None = None  # sheet name, slide title, section heading
    meta: dict[str, Any] = field(default_factory=dict)
    # sheets only: every row as displayed strings, row 1 first (header row included);
    # `row_offsets[i]` is where row i+1 starts in `body`
    rows: list[list[str]] | None = None
    row_offsets: list[int] | None = None


@dataclass
class ParsedDocument:
    file_type: str  # extension without dot, lower case
    units: list[Unit]
    title: str | None = None
    author: str | None = None
    created: datetime | None = None
    modified: datetime | None = None
    outline: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n\n".join(u.body for u in self.units if u.body)


@dataclass(frozen=True)
class Source:
    """A file to parse, already opened by the rules of files.py: parsers read `file` and
    never reopen `path`, which only names it (extension, messages)."""

    path: pathlib.Path
    file: BinaryIO

    @property
    def ext(self) -> str:
        return self.path.suffix.lower().lstrip(".")

    def read(self, limit: int) -> bytes:
        """The whole file, or TOO_LARGE when it holds more than `limit` bytes."""
        self.file.seek(0)
        data = self.file.read(limit + 1)
        if len(data) > limit:
            raise ParseError(
                ErrorCode.TOO_LARGE, f"the file is larger than {limit // (1 << 20)} MB"
            )
        return data


class ParseError(Exception):
    """A file we cannot read. `code` is stable (stored as the document's error_code)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
