"""A chunk's disabled flag (migration 0032, sql/functions/72_chunk_state.sql): which
chunk the caller sees, and the flag's change."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

import psycopg

# run under the caller's scope: row-level security hides another collection's chunk
VISIBLE_SQL = "SELECT c.collection_id FROM pgrag.chunks c WHERE c.id = %s"
DISABLED_IN_DOCUMENT_SQL = """
SELECT count(*) FROM pgrag.chunks c WHERE c.document_id = %s::uuid AND c.disabled_at IS NOT NULL
"""
SET_SQL = """
SELECT chunk_id, document_id, collection_id, disabled_at
FROM pgrag.set_chunk_disabled(%s, %s, %s)
"""


@dataclass(frozen=True)
class ChunkState:
    chunk_id: int
    document_id: UUID
    collection_id: int
    disabled_at: datetime | None


async def visible_collection(conn: psycopg.AsyncConnection, chunk_id: int) -> int | None:
    """The chunk's collection, None when the connection's scope does not show it."""
    row = await (await conn.execute(VISIBLE_SQL, (chunk_id,))).fetchone()
    return None if row is None else int(row[0])


async def set_disabled(
    conn: psycopg.AsyncConnection, chunk_id: int, collection_id: int, disabled: bool
) -> ChunkState | None:
    row = await (await conn.execute(SET_SQL, (chunk_id, disabled, collection_id))).fetchone()
    return None if row is None else ChunkState(row[0], row[1], row[2], row[3])


async def disabled_in_document(conn: psycopg.AsyncConnection, document_id: str) -> int:
    row = await (await conn.execute(DISABLED_IN_DOCUMENT_SQL, (document_id,))).fetchone()
    return int(row[0]) if row else 0
