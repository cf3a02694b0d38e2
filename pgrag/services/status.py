"""Ingestion status: counts by status, and per-document progress and errors."""

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
       (SELECT count(*) FROM pgrag.chunks ch WHERE ch.document_id = d.id) AS chunks
FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
WHERE d.id::text = %(ref)s OR d.path = %(ref)s OR d.name = %(ref)s
ORDER BY (d.id::text = %(ref)s) DESC, (d.path = %(ref)s) DESC
LIMIT 2
"""


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
    return {
        "counts": counts,
        "total": sum(counts.values()),
        "processing": [r for r in rows if r["status"] in ("processing", "pending")],
        "failed": [r for r in rows if r["status"] == "failed"],
    }
