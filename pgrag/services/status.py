"""Ingestion status: counts by status, per-document progress and errors, documents still
waiting for vectors, what OCR did, readiness."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from pgrag.db.scope import scoped_connection
from pgrag.errors import NotFound
from pgrag.services.documents import DocumentRef
from pgrag.services.table_sources import source_infos
from pgrag.store import status as store

DOCUMENT_STATUS_KEYS = (
    "document_id",
    "path",
    "status",
    "progress",
    "error_code",
    "error_detail",
    "vectors_pending",
    "ocr",
)


def document_status(doc: DocumentRef) -> dict[str, Any]:
    """One document's status, progress and error, as REST /api/status?document= answers."""
    return {k: getattr(doc.row, k) for k in DOCUMENT_STATUS_KEYS}


async def status_report(
    conn: psycopg.AsyncConnection, document: str | None = None, scope: list[str] | None = None
) -> dict[str, Any]:
    """`scope`: the collections the caller may see (None = all); counts and lists only."""
    if document:
        found = await store.document_states(conn, document)
        if not found:
            raise NotFound(f"no document '{document}': use its document_id, path or file name")
        return asdict(found[0])
    counts = {s: 0 for s in ("pending", "processing", "ready", "failed")}
    counts.update({c.status: c.count for c in await store.status_counts(conn, scope)})
    rows = [asdict(r) for r in await store.not_ready(conn, scope)]
    ocr = await store.ocr_summary(conn, scope)
    totals, waiting = await store.waiting_for_vectors(conn, scope)
    return {
        "counts": counts,
        "total": sum(counts.values()),
        "processing": [r for r in rows if r["status"] in ("processing", "pending")],
        "failed": [r for r in rows if r["status"] == "failed"],
        # ready (searchable by keyword) while their vectors are computed: chunks embedded
        # of chunks, and why they wait if the provider failed
        "waiting_for_vectors": [
            {**asdict(w), "embedded": w.chunks - w.vectors_pending} for w in waiting
        ],
        "vectors_pending": asdict(totals),
        "ocr": asdict(ocr) if ocr and (ocr.documents or ocr.unavailable) else None,
        # table sources: rows indexed, pending (exact), failures with reasons, lag
        "sources": [i.model_dump(mode="json") for i in await source_infos(conn)],
    }


async def report_for(pool: AsyncConnectionPool, scope: list[str] | None) -> dict[str, Any]:
    """`status_report` for every document the caller may see, in one snapshot."""
    async with scoped_connection(pool, scope) as conn:
        return await status_report(conn, None, scope)


async def database_ready(pool: AsyncConnectionPool | None) -> bool:
    """Readiness: a pooled connection within 2 s and the database answers (None: the
    server is still starting)."""
    if pool is None:
        return False
    try:
        async with pool.connection(timeout=2) as conn:
            await store.ping(conn)
    except Exception:
        return False
    return True
