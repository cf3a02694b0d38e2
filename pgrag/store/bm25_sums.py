"""BM25's per-collection statistics (migration 0023, sql/functions/25_bm25_sums.sql): the
writer's part. On a single server triggers on pgrag.chunks keep the sums and `write` does
nothing; on Citus, which runs no such triggers, the writer takes a document's chunks out
before deleting them and adds the new ones after inserting them, in the same transaction.
"""

from __future__ import annotations

from uuid import UUID

import psycopg

WRITE_SQL = "SELECT pgrag.write_bm25_sums(%s, %s, %s)"
FORGET_SQL = "SELECT pgrag.write_bm25_sums(%s, d, -1) FROM unnest(%s::uuid[]) d"
COMPACT_SQL = "SELECT pgrag.compact_bm25_sums(%s)"


async def write(
    conn: psycopg.AsyncConnection, collection_id: int, document_id: UUID, sign: int
) -> None:
    """Add (sign 1) or subtract (-1) the document's chunks as they are now."""
    await conn.execute(WRITE_SQL, (collection_id, document_id, sign))


async def forget(
    conn: psycopg.AsyncConnection, collection_id: int, document_ids: list[str]
) -> None:
    """Subtract these documents' chunks, before deleting them."""
    await conn.execute(FORGET_SQL, (collection_id, document_ids))


async def compact(conn: psycopg.AsyncConnection, collection_id: int | None) -> None:
    """Fold the rows appended per statement into one per collection and lexeme."""
    await conn.execute(COMPACT_SQL, (collection_id,))
