"""Typed rows read from Postgres (psycopg `class_row`), shared by store, search
and services, so callers read fields by name instead of tuple positions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

# ---- search -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RankedRow:
    """One row of a ranker function (sql/functions/56_rankers.sql), read by column
    name; a query leaves out the columns its ranking has no value for."""

    rank: int
    chunk_id: int  # the best chunk of a document for scope=documents
    document_id: UUID
    total: int  # rows in the whole ranking (chunks, or documents for scope=documents)
    lexical_rank: int | None = None
    lexical_score: float | None = None
    semantic_rank: int | None = None
    semantic_score: float | None = None
    fused_score: float | None = None
    regex_matches: int | None = None
    chunk_ids: list[int] | None = None  # scope=documents: the document's best chunks
    # an explained fused chunk search (pgrag.rank_fused with_parts): its fused score's terms
    fusion: str | None = None
    lexical_part: float | None = None
    semantic_part: float | None = None
    lexical_share: float | None = None
    semantic_cosine: float | None = None
    centred: bool | None = None


@dataclass(frozen=True)
class ChunkDetail:
    """A hit chunk with its document and a window of its unit's text (CHUNK_DETAILS_SQL)."""

    id: int
    document_id: str
    name: str
    path: str
    file_type: str
    title: str | None
    author: str | None
    modified_at: datetime | None
    outline: dict[str, Any] | None
    content: str
    char_start: int
    char_end: int
    page: int | None
    section: str | None
    sheet: str | None
    row_start: int | None
    row_end: int | None
    slide: int | None
    heading: str | None
    base: int  # where `window` starts in the unit's text
    window: str | None  # None when the chunk has no unit
    body_len: int | None
    lang: str | None
    collection_id: int  # the shard a read of the whole document goes to on Citus
    has_vector: bool  # in the active embedding set; not yet while its vectors are computed
    context: str | None  # the document context the chunk carries (ingest/context)


# ---- pages, sheets, slides ----------------------------------------------------------------


@dataclass(frozen=True)
class UnitRow:
    """A stored page, sheet, slide or section of a document (pgrag.units)."""

    id: int
    kind: str
    number: int
    title: str | None
    body: str
    meta: dict[str, Any]


@dataclass(frozen=True)
class SheetRow:
    """One spreadsheet row as displayed (pgrag.sheet_rows); row 1 is the header row."""

    row_number: int
    cells: list[str]


# ---- saved documents ----------------------------------------------------------------------


@dataclass(frozen=True)
class LockedSaved:
    """A document row locked for a change by the write tools."""

    id: UUID
    source: str
    title: str | None
    tags: list[str]
    metadata: dict[str, Any]
    created_at: datetime | None
    collection_id: int


@dataclass(frozen=True)
class SavedRow:
    """A saved document as find_documents lists it, with its whole text."""

    document_id: str
    title: str | None
    path: str
    folder: str
    tags: list[str]
    metadata: dict[str, Any]
    created_at: datetime | None
    modified_at: datetime | None
    collection: str
    content: str | None


# ---- documents ----------------------------------------------------------------------------


@dataclass(frozen=True)
class DocumentRow:
    """A stored document with its collection, as a reference resolves to (DOCUMENT_COLUMNS
    in store/catalog.py)."""

    document_id: str
    name: str
    path: str
    folder: str
    file_type: str
    status: str  # pending, processing, ready or failed
    progress: float
    vectors_pending: int
    error_code: str | None
    error_detail: str | None
    title: str | None
    author: str | None
    submitter: str | None
    size_bytes: int | None
    tags: list[str]
    created_at: datetime | None
    modified_at: datetime | None
    ingested_at: datetime | None
    outline: dict[str, Any] | None
    metadata: dict[str, Any]
    collection: str
    ocr: dict[str, Any] | None  # what OCR did (metadata -> 'ocr')
