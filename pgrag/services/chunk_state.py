"""Disabling a chunk (it stops appearing in every search mode) and enabling it again: the
MCP write tool set_chunk_enabled and the console's Disable / Enable button call this.

The chunk must be one the caller sees (a collection-limited key: in its own collections,
which are the ones it may write); another collection's chunk is NOT_FOUND, as if it did not
exist. The check runs under the caller's scope, the write on an unscoped connection (the
scoped role may only read), naming the chunk's collection (on Citus, its one shard). The
transport checks that writes are allowed at all (read-only server, read-only token)."""

from __future__ import annotations

from datetime import datetime

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from pgrag.db.scope import scoped_connection
from pgrag.errors import NotFound
from pgrag.store import chunk_state as store


class ChunkEnabled(BaseModel):
    """A chunk's state after the change."""

    chunk_id: int
    document_id: str
    enabled: bool
    disabled_at: datetime | None = None


async def set_chunk_enabled(
    pool: AsyncConnectionPool, scope: list[str] | None, chunk_id: int, enabled: bool
) -> ChunkEnabled:
    """Enable or disable one chunk the caller sees; doing it twice changes nothing more (a
    disabled chunk keeps the date it was first disabled)."""
    async with scoped_connection(pool, scope) as conn:
        collection_id = await store.visible_collection(conn, chunk_id)
    if collection_id is None:
        raise NotFound(f"no chunk {chunk_id} (or not in a collection this key may use)")
    async with pool.connection() as conn:
        state = await store.set_disabled(conn, chunk_id, collection_id, not enabled)
    if state is None:  # deleted in between (its document re-ingested or removed)
        raise NotFound(f"no chunk {chunk_id}")
    return ChunkEnabled(
        chunk_id=state.chunk_id,
        document_id=str(state.document_id),
        enabled=state.disabled_at is None,
        disabled_at=state.disabled_at,
    )


async def disabled_chunks(
    pool: AsyncConnectionPool, scope: list[str] | None, document_id: str
) -> int:
    """How many of a document's chunks are disabled (the console's "Why not?")."""
    async with scoped_connection(pool, scope) as conn:
        return await store.disabled_in_document(conn, document_id)
