"""Ingestion status SQL: counts by status, documents not ready, documents whose vectors are
still being computed, one document's state, and the readiness probe. Rows are typed
(class_row)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import class_row

SCOPE = """
collection_id IN (SELECT id FROM pgrag.collections
                  WHERE %(scope)s::text[] IS NULL OR name = ANY(%(scope)s::text[]))
"""
COUNTS_SQL = "SELECT status, count(*) FROM pgrag.documents WHERE" + SCOPE + "GROUP BY status"
NOT_READY_SQL = (
    "SELECT id::text AS document_id, path, status, progress, error_code, error_detail"
    " FROM pgrag.documents WHERE status <> 'ready' AND" + SCOPE + "ORDER BY status, path LIMIT 200"
)
# searchable by keyword, vectors pending (two-phase ingestion: pgrag.ingest.vector_stage)
WAITING_SQL = (
    "SELECT id::text AS document_id, path, vectors_pending, error_code, error_detail,"
    " (SELECT count(*) FROM pgrag.chunks ch"
    "  WHERE ch.document_id = d.id AND ch.collection_id = d.collection_id) AS chunks"
    " FROM pgrag.documents d WHERE vectors_pending > 0 AND status = 'ready' AND"
    + SCOPE
    + "ORDER BY path LIMIT 200"
)
WAITING_TOTALS_SQL = (
    "SELECT count(*) AS documents, coalesce(sum(vectors_pending), 0)::bigint AS chunks"
    " FROM pgrag.documents WHERE vectors_pending > 0 AND status = 'ready' AND" + SCOPE
)
ONE_SQL = """
SELECT d.id AS document_id, d.path, d.name, c.name AS collection, d.status, d.progress,
       d.error_code, d.error_detail, d.updated_at, d.ingested_at,
       (SELECT count(*) FROM pgrag.chunks ch
        WHERE ch.document_id = d.id AND ch.collection_id = d.collection_id) AS chunks,
       d.vectors_pending, d.metadata -> 'ocr' AS ocr
FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
WHERE d.id::text = %(ref)s OR d.path = %(ref)s OR d.name = %(ref)s
ORDER BY (d.id::text = %(ref)s) DESC, (d.path = %(ref)s) DESC
LIMIT 2
"""
# documents whose pages were read by OCR (the summary their parser stored in metadata):
# pages read, pages that failed, confidence weighted by pages read; and the documents
# that could not be read because no OCR engine is installed
OCR_SQL = (
    """
SELECT count(ocr) AS documents, coalesce(sum(pages), 0) AS pages,
       coalesce(sum(failed), 0) AS failed_pages,
       round(sum(confidence * (pages - failed)) / nullif(sum(pages - failed), 0), 4)::float
         AS mean_confidence,
       count(*) FILTER (WHERE error_code = 'OCR_UNAVAILABLE') AS unavailable
FROM (SELECT metadata -> 'ocr' AS ocr, error_code,
             jsonb_array_length(metadata -> 'ocr' -> 'pages') AS pages,
             jsonb_array_length(coalesce(metadata -> 'ocr' -> 'failed_pages', '[]')) AS failed,
             (metadata -> 'ocr' ->> 'mean_confidence')::numeric AS confidence
      FROM pgrag.documents
      WHERE (metadata ? 'ocr' OR error_code = 'OCR_UNAVAILABLE') AND"""
    + SCOPE
    + ") d"
)
PING_SQL = "SELECT 1"


@dataclass(frozen=True)
class StatusCount:
    status: str
    count: int


@dataclass(frozen=True)
class NotReady:
    document_id: str
    path: str
    status: str
    progress: float
    error_code: str | None
    error_detail: str | None


@dataclass(frozen=True)
class DocumentState:
    document_id: UUID
    path: str
    name: str
    collection: str
    status: str
    progress: float
    error_code: str | None
    error_detail: str | None
    updated_at: datetime | None
    ingested_at: datetime | None
    chunks: int
    vectors_pending: int  # chunks searchable by keyword only, their vectors still to come
    ocr: dict[str, Any] | None  # engine, pages, confidence, failed pages


@dataclass(frozen=True)
class WaitingForVectors:
    """A document whose chunks are searchable by keyword, some vectors still pending."""

    document_id: str
    path: str
    vectors_pending: int
    error_code: str | None  # why they wait, when the provider failed
    error_detail: str | None
    chunks: int


@dataclass(frozen=True)
class WaitingTotals:
    documents: int
    chunks: int


@dataclass(frozen=True)
class OcrSummary:
    documents: int
    pages: int
    failed_pages: int
    mean_confidence: float | None
    unavailable: int


async def status_counts(
    conn: psycopg.AsyncConnection, scope: list[str] | None
) -> list[StatusCount]:
    async with conn.cursor(row_factory=class_row(StatusCount)) as cur:
        await cur.execute(COUNTS_SQL, {"scope": scope})
        return await cur.fetchall()


async def not_ready(conn: psycopg.AsyncConnection, scope: list[str] | None) -> list[NotReady]:
    """At most 200 documents pending, processing or failed, by status and path."""
    async with conn.cursor(row_factory=class_row(NotReady)) as cur:
        await cur.execute(NOT_READY_SQL, {"scope": scope})
        return await cur.fetchall()


async def waiting_for_vectors(
    conn: psycopg.AsyncConnection, scope: list[str] | None
) -> tuple[WaitingTotals, list[WaitingForVectors]]:
    """How many documents and chunks wait for vectors, and at most 200 of them by path."""
    async with conn.cursor(row_factory=class_row(WaitingTotals)) as cur:
        await cur.execute(WAITING_TOTALS_SQL, {"scope": scope})
        totals = await cur.fetchone()
    async with conn.cursor(row_factory=class_row(WaitingForVectors)) as cur:
        await cur.execute(WAITING_SQL, {"scope": scope})
        rows = await cur.fetchall()
    return totals or WaitingTotals(0, 0), rows


async def document_states(conn: psycopg.AsyncConnection, ref: str) -> list[DocumentState]:
    """The document `ref` names (id, path or file name): exact id first, then exact path."""
    async with conn.cursor(row_factory=class_row(DocumentState)) as cur:
        await cur.execute(ONE_SQL, {"ref": ref})
        return await cur.fetchall()


async def ocr_summary(conn: psycopg.AsyncConnection, scope: list[str] | None) -> OcrSummary | None:
    """What OCR did over the visible documents (None: no row, which an aggregate never is)."""
    async with conn.cursor(row_factory=class_row(OcrSummary)) as cur:
        await cur.execute(OCR_SQL, {"scope": scope})
        return await cur.fetchone()


async def ping(conn: psycopg.AsyncConnection) -> None:
    """One round trip: the database answers."""
    await conn.execute(PING_SQL)
