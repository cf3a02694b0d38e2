"""Versions whose writer died: a document is `processing` from the moment its new version is
started until it is written or failed. A process killed in between (SIGKILL, out of memory,
a power cut) left it `processing` forever; an upload is never retried by anyone.

The writer holds a session advisory lock named after the document while the document is
`processing`; the server drops a dead session's locks. So a `processing` document whose lock
nobody holds belongs to a writer that died: `fail_interrupted` marks it failed with
INTERRUPTED (retried by the next ingest of its folder). Taken with pg_try_advisory_lock on
both sides: a leaked lock can only keep a document from being recovered, never block a
writer. The locks live on the coordinator (on Citus too): every statement here runs there.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import psycopg

from pgrag.errors import ErrorCode
from pgrag.store.changes import changing

_KEY = "hashtextextended('pgrag.writing:' || %s::text || ':' || %s, 0)"
TRY_LOCK_SQL = f"SELECT pg_try_advisory_lock({_KEY})"
UNLOCK_SQL = f"SELECT pg_advisory_unlock({_KEY})"
PROCESSING_SQL = """
SELECT collection_id, id, path FROM pgrag.documents
WHERE status = 'processing' AND (%(cid)s::bigint IS NULL OR collection_id = %(cid)s)
"""
FAIL_SQL = """
UPDATE pgrag.documents
   SET status = 'failed', error_code = %(code)s, error_detail = %(detail)s, progress = 0,
       updated_at = now()
 WHERE collection_id = %(cid)s AND id = %(id)s AND status = 'processing'
"""
DETAIL = (
    "ingestion stopped before this version was written (the process was killed or the "
    "machine stopped); the previous version, if any, is kept: ingest or upload the file again"
)


async def _try_lock(conn: psycopg.AsyncConnection, collection_id: int, path: str) -> bool:
    row = await (await conn.execute(TRY_LOCK_SQL, (collection_id, path))).fetchone()
    return bool(row and row[0])


@contextlib.asynccontextmanager
async def writing(
    conn: psycopg.AsyncConnection, collection_id: int, path: str
) -> AsyncIterator[None]:
    """Held by the writer of a document's new version, on the connection it writes with."""
    held = await _try_lock(conn, collection_id, path)
    try:
        yield
    finally:
        if held and not conn.closed:
            with contextlib.suppress(psycopg.Error):
                await conn.execute(UNLOCK_SQL, (collection_id, path))


async def fail_interrupted(
    conn: psycopg.AsyncConnection, collection_id: int | None = None
) -> list[str]:
    """Mark failed (INTERRUPTED) the `processing` documents (of one collection, or all)
    whose writer is gone; their paths."""
    rows = await (await conn.execute(PROCESSING_SQL, {"cid": collection_id})).fetchall()
    failed: list[str] = []
    for cid, doc_id, path in rows:
        if not await _try_lock(conn, cid, path):
            continue  # a live writer
        try:
            async with changing(conn, "UPDATE"):
                cur = await conn.execute(
                    FAIL_SQL,
                    {"cid": cid, "id": doc_id, "code": ErrorCode.INTERRUPTED, "detail": DETAIL},
                )
            if cur.rowcount:
                failed.append(path)
        finally:
            await conn.execute(UNLOCK_SQL, (cid, path))
    return failed
