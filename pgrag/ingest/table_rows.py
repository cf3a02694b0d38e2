"""One row of a table source as a document: each text column a section under the column's
name, the title column as the title, the metadata columns as the document's metadata.
Pure functions (no database): chunked like any document by build_chunks."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pgrag.errors import ErrorCode
from pgrag.ingest.context import embed_text
from pgrag.ingest.parsers.base import ParsedDocument, Unit
from pgrag.ingest.prepare import build_chunks, human_size
from pgrag.store.documents import ChunkRow, DocumentFields
from pgrag.store.table_sources import SourceRow, TableRow, key_text

ROOT = "tables"
FILE_TYPE = "row"


@dataclass(frozen=True)
class Chunking:
    tokens: int
    overlap: int
    context_tokens: int
    max_chars: int = 64_000_000  # PGRAG_PARSE_MAX_CHARS: a row is bounded as a file is
    max_chunks: int = 100_000  # PGRAG_PARSE_MAX_CHUNKS


@dataclass
class RowVersion:
    """What the store writes for one row, and what decides whether it must."""

    key: dict[str, Any]
    fields: DocumentFields
    units: list[Unit]
    chunks: list[ChunkRow]
    failure: tuple[str, str] | None = None  # (stable code, reason): a failed row, no chunks

    def embed_texts(self) -> list[str]:
        return [embed_text(c.heading, c.context, c.draft.content) for c in self.chunks]


def key_label(key: dict[str, Any]) -> str:
    """The key as a document name: the value of a one-column key, else the JSON object."""
    if len(key) == 1:
        (value,) = key.values()
        return str(value)
    return key_text(key)


def row_path(source: SourceRow, key: dict[str, Any]) -> str:
    return f"{ROOT}/{source.name}/{key_label(key)}"


def _units(source: SourceRow, row: TableRow) -> list[Unit]:
    units: list[Unit] = []
    for column, text in zip(source.text_columns, row.texts, strict=True):
        body = (text or "").replace("\r\n", "\n").replace("\x00", " ").strip()
        if body:
            units.append(Unit("section", len(units) + 1, body, title=column))
    return units


def content_hash(title: str, units: list[Unit]) -> str:
    """The derived text's hash: the same title and sections, the same document."""
    derived = json.dumps([title, [(u.title, u.body) for u in units]], ensure_ascii=False)
    return hashlib.sha256(derived.encode()).hexdigest()


def failed_row(source: SourceRow, key: dict[str, Any], failure: tuple[str, str]) -> RowVersion:
    """A row that could not be read (a value PostgreSQL cannot give as text): a failed
    document with the reason, no text."""
    label = key_label(key)
    fields = DocumentFields(
        path=row_path(source, key),
        folder=f"{ROOT}/{source.name}",
        name=label,
        file_type=FILE_TYPE,
        size_bytes=0,
        content_hash="",
        title=f"{source.name} {label}",
        author=None,
        created_at=None,
        modified_at=None,
        outline={"type": FILE_TYPE, "source": _source(source, key)},
        metadata={},
    )
    return RowVersion(key, fields, [], [], failure)


def _source(source: SourceRow, key: dict[str, Any]) -> dict[str, Any]:
    return {"table": source.relation, "key": key, "source": source.name}


def row_version(source: SourceRow, row: TableRow, chunking: Chunking) -> RowVersion | None:
    """The row's document, or None when its text columns are all empty (no document)."""
    units = _units(source, row)
    if not units:
        return None
    label = key_label(row.key)
    title = (row.title or "").strip() or f"{source.name} {label}"
    doc = ParsedDocument(FILE_TYPE, units, title=title, metadata=row.metadata)
    size = sum(len(u.body.encode()) for u in units)
    fields = DocumentFields(
        path=row_path(source, row.key),
        folder=f"{ROOT}/{source.name}",
        name=label,
        file_type=FILE_TYPE,
        size_bytes=size,
        content_hash=content_hash(title, units),
        title=title,
        author=None,
        created_at=None,
        modified_at=None,
        outline={
            "type": FILE_TYPE,
            "title": title,
            "file_size": human_size(size),
            "size_bytes": size,
            "sections": [u.title for u in units],
            "source": _source(source, row.key),
        },
        metadata=row.metadata,
    )
    chars = sum(len(u.body) for u in units)
    if chars > chunking.max_chars:  # before chunking it
        reason = f"the row's text has {chars:,} characters; at most {chunking.max_chars:,}"
        return RowVersion(row.key, fields, [], [], (ErrorCode.TOO_LARGE, reason + _RAISE_CHARS))
    chunks = build_chunks(doc, title, chunking.tokens, chunking.overlap, chunking.context_tokens)
    if len(chunks) > chunking.max_chunks:
        reason = f"the row's text makes {len(chunks):,} chunks; at most {chunking.max_chunks:,}"
        return RowVersion(row.key, fields, [], [], (ErrorCode.TOO_LARGE, reason + _RAISE_CHUNKS))
    return RowVersion(row.key, fields, units, chunks)


_RAISE_CHARS = " (PGRAG_PARSE_MAX_CHARS)"
_RAISE_CHUNKS = " (PGRAG_PARSE_MAX_CHUNKS)"
