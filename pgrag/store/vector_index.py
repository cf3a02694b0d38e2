"""A set's HNSW index: whether it is there, dropped, and built in one go.

A large backfill builds it once at its end: an insert into a graph of 10⁵ vectors cost
~15 ms here against ~1.3 ms a vector for a bulk build with the graph in memory
(docs/table-sources.md, "The vector index during a large backfill")."""

from __future__ import annotations

import enum
from typing import LiteralString, cast

import psycopg
from psycopg import sql


class IndexState(enum.StrEnum):
    VALID = "valid"
    MISSING = "missing"
    INVALID = "invalid"  # a concurrent build that stopped midway, or one under way


STATE_SQL = "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)"
# the set's vectors, from the per-language sums (no scan of the set)
VECTORS_SQL = """
SELECT coalesce(sum(n), 0) FROM pgrag.language_sums WHERE collection_id = %s AND set_id = %s
"""
# a CREATE INDEX on pgrag.embeddings under way (its phase; NULL to a role that may not see it)
BUILDING_SQL = """
SELECT coalesce(phase, 'under way') FROM pg_stat_progress_create_index
WHERE relid = 'pgrag.embeddings'::regclass LIMIT 1
"""
DROP_SQL = "DROP INDEX {concurrently} IF EXISTS pgrag.{index}"
DROP_AS_OWNER_SQL = "SELECT pgrag.drop_embedding_index(%s)"
STATEMENT_SQL = "SELECT pgrag.embedding_index_sql(%s, true), pgrag.vector_search_path()"
BUILD_AS_OWNER_SQL = "SELECT pgrag.ensure_embedding_index(%s)"
SET_SQL = "SELECT set_config(%s, %s, false)"
# one build per set at a time, across pgrag processes (a session lock)
TRY_LOCK_SQL = "SELECT pg_try_advisory_lock(hashtextextended('pgrag.vector_index', %s))"
UNLOCK_SQL = "SELECT pg_advisory_unlock(hashtextextended('pgrag.vector_index', %s))"


def index_name(set_id: int) -> str:
    """The name pgrag.embedding_index_sql gives a set's HNSW index."""
    return f"embeddings_hnsw_{set_id}"


async def state(conn: psycopg.AsyncConnection, set_id: int) -> IndexState:
    row = await (await conn.execute(STATE_SQL, (f"pgrag.{index_name(set_id)}",))).fetchone()
    if row is None:
        return IndexState.MISSING
    return IndexState.VALID if row[0] else IndexState.INVALID


async def vectors(conn: psycopg.AsyncConnection, collection_id: int, set_id: int) -> int:
    row = await (await conn.execute(VECTORS_SQL, (collection_id, set_id))).fetchone()
    return int(row[0]) if row else 0


async def building(conn: psycopg.AsyncConnection) -> str | None:
    """The phase of an index build on pgrag.embeddings under way, if any."""
    row = await (await conn.execute(BUILDING_SQL)).fetchone()
    return str(row[0]) if row else None


async def drop(conn: psycopg.AsyncConnection, set_id: int, *, concurrently: bool) -> None:
    """As the table's owner, concurrently if asked; as the application role, through the
    owner's pgrag.drop_embedding_index (sql/functions/80_grants.sql), which cannot be."""
    statement = sql.SQL(DROP_SQL).format(
        concurrently=sql.SQL("CONCURRENTLY" if concurrently else ""),
        index=sql.Identifier(index_name(set_id)),
    )
    try:
        await conn.execute(statement)
    except psycopg.errors.InsufficientPrivilege:
        await conn.execute(DROP_AS_OWNER_SQL, (set_id,))


async def build(conn: psycopg.AsyncConnection, set_id: int, memory: str) -> bool:
    """Build the set's index with `memory` of maintenance_work_mem (a graph built in memory
    is several times faster than one spilling); False when another process is building
    it. As the table's owner CONCURRENTLY (writes go on); as the application role through
    pgrag.ensure_embedding_index, which holds writes to pgrag.embeddings meanwhile. A
    parallel build that cannot get its shared memory (a container's small /dev/shm) is
    done again by one process. `conn` must be in autocommit mode (the pool's are)."""
    if not await _scalar(conn, TRY_LOCK_SQL, (set_id,)):
        return False
    try:
        try:
            await _build(conn, set_id, {"maintenance_work_mem": memory})
        except (psycopg.errors.DiskFull, psycopg.errors.OutOfMemory):
            serial = {"maintenance_work_mem": memory, "max_parallel_maintenance_workers": "0"}
            await _build(conn, set_id, serial)
        return True
    finally:
        await conn.execute(UNLOCK_SQL, (set_id,))


async def _build(conn: psycopg.AsyncConnection, set_id: int, settings: dict[str, str]) -> None:
    if await state(conn, set_id) is IndexState.INVALID:  # a build that stopped midway
        await drop(conn, set_id, concurrently=True)
    for name, value in settings.items():
        await conn.execute(SET_SQL, (name, value))
    try:
        await _build_concurrently(conn, set_id)
    except psycopg.errors.InsufficientPrivilege:
        async with conn.transaction():
            await conn.execute(BUILD_AS_OWNER_SQL, (set_id,))
    finally:
        for name in [*settings, "search_path"]:
            await conn.execute(sql.SQL("RESET {}").format(sql.Identifier(name)))


async def _build_concurrently(conn: psycopg.AsyncConnection, set_id: int) -> None:
    row = await (await conn.execute(STATEMENT_SQL, (set_id,))).fetchone()
    if row is None or row[0] is None:
        return  # the set is gone
    statement, search_path = row
    await conn.execute(SET_SQL, ("search_path", search_path))
    # pgrag's own statement, composed by pgrag.embedding_index_sql from the set's catalogue row
    await conn.execute(cast(LiteralString, statement))


async def _scalar(conn: psycopg.AsyncConnection, query: LiteralString, params: tuple[int]) -> bool:
    row = await (await conn.execute(query, params)).fetchone()
    return bool(row and row[0])
