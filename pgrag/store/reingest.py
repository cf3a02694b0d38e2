"""A document queued to be ingested again from its unchanged file: its content hash is
forgotten, so the next ingestion of its path parses, chunks and embeds it anew."""

from __future__ import annotations

import psycopg

# only a document no run is working on: a second run on the same path would race the first
QUEUE_SQL = """
UPDATE pgrag.documents
   SET content_hash = NULL, status = 'pending', progress = 0, updated_at = now()
 WHERE id = %s AND status IN ('ready', 'failed')
RETURNING true
"""


async def queue_reingest(conn: psycopg.AsyncConnection, document_id: str) -> bool:
    """Whether the document was queued (False: an ingestion has it already)."""
    return await (await conn.execute(QUEUE_SQL, (document_id,))).fetchone() is not None
