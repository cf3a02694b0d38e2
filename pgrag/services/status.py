"""Ingestion status: counts by status, per-document progress and errors, and what OCR did."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from pgrag.errors import NotFound

SCOPE = """
collection_id IN (SELECT id FROM pgrag.collections
                  WHERE %(scope)s::text[] IS NULL OR name = ANY(%(scope)s::text[]))
"""
COUNTS_SQL = "SELECT status, count(*) FROM pgrag.documents WHERE" + SCOPE + "GROUP BY status"
NOT_READY_SQL = (
    "SELECT id::text AS document_id, path, status, progress, error_code, error_detail"
    " FROM pgrag.documents WHERE status <> 'ready' AND" + SCOPE + "ORDER BY status, path LIMIT 200"
)
ONE_SQL = """
SELECT d.id AS document_id, d.path, d.name, c.name AS collection, d.status, d.progress,
       d.error_code, d.error_detail, d.updated_at, d.ingested_at,
       (SELECT count(*) FROM pgrag.chunks ch WHERE ch.document_id = d.id) AS chunks,
       d.metadata -> 'ocr' AS ocr
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


async def status_report(
    conn: psycopg.AsyncConnection, document: str | None = None, scope: list[str] | None = None
) -> dict[str, Any]:
    """`scope`: the collections the caller may see (None = all); counts and lists only."""
    if document:
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(ONE_SQL, {"ref": document})
            rows = await cur.fetchall()
        if not rows:
            raise NotFound(f"no document '{document}': use its document_id, path or file name")
        return rows[0]
    counts = {s: 0 for s in ("pending", "processing", "ready", "failed")}
    counts.update(dict(await (await conn.execute(COUNTS_SQL, {"scope": scope})).fetchall()))
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(NOT_READY_SQL, {"scope": scope})
        rows = await cur.fetchall()
        await cur.execute(OCR_SQL, {"scope": scope})
        ocr = await cur.fetchone()
    return {
        "counts": counts,
        "total": sum(counts.values()),
        "processing": [r for r in rows if r["status"] in ("processing", "pending")],
        "failed": [r for r in rows if r["status"] == "failed"],
        "ocr": ocr if ocr and (ocr["documents"] or ocr["unavailable"]) else None,
    }
