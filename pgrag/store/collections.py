"""Collections and their embedding sets (which model, which dimension, which is active)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import psycopg
from psycopg.rows import class_row

from pgrag.db.one import scalar
from pgrag.errors import InvalidArgument, NotFound, PgragError


class Embedder(Protocol):
    """What a collection records of an embedding provider: its model's name."""

    @property
    def model(self) -> str: ...


@dataclass(frozen=True)
class Collection:
    id: int
    name: str
    set_id: int | None
    model: str | None
    dimensions: int | None


COLLECTION_SQL = """
SELECT c.id, c.name, es.id AS set_id, es.model, es.dimensions
FROM pgrag.collections c
LEFT JOIN pgrag.embedding_sets es ON es.id = c.active_set_id
"""
GET_SQL = COLLECTION_SQL + " WHERE c.name = %s"
LIST_SQL = COLLECTION_SQL + " ORDER BY c.name"
INSERT_COLLECTION_SQL = """
INSERT INTO pgrag.collections (name) VALUES (%s) ON CONFLICT (name) DO NOTHING
"""
INSERT_SET_SQL = """
INSERT INTO pgrag.embedding_sets (collection_id, model, dimensions, state)
VALUES (%s, %s, %s, %s)
ON CONFLICT (collection_id, model) DO UPDATE SET dimensions = EXCLUDED.dimensions
RETURNING id
"""
ACTIVATE_SQL = (
    "UPDATE pgrag.embedding_sets SET state = 'retired'"
    " WHERE collection_id = %(cid)s AND state = 'active' AND id <> %(sid)s",
    "UPDATE pgrag.embedding_sets SET state = 'active' WHERE id = %(sid)s",
    "UPDATE pgrag.collections SET active_set_id = %(sid)s WHERE id = %(cid)s",
)
ENSURE_INDEX_SQL = "SELECT pgrag.ensure_embedding_index(%s)"
# Writes to the two small tables wait for each other. On Citus, where they are reference
# tables with foreign keys both ways, each write locks its table's shard and then the
# other's: two writes in opposite order (a new collection, a set activated) deadlock.
CATALOG_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended('pgrag.catalog', 0))"


async def lock_catalog(conn: psycopg.AsyncConnection) -> None:
    """Take the catalog lock; first in any transaction that writes collections or sets."""
    await conn.execute(CATALOG_LOCK_SQL)


async def get_collection(conn: psycopg.AsyncConnection, name: str) -> Collection:
    async with conn.cursor(row_factory=class_row(Collection)) as cur:
        await cur.execute(GET_SQL, (name,))
        row = await cur.fetchone()
    if row is None:
        raise NotFound(
            f"no collection named '{name}'; ingest into it first (pgrag ingest PATH --collection {name})"
        )
    return row


async def list_collections(conn: psycopg.AsyncConnection) -> list[Collection]:
    async with conn.cursor(row_factory=class_row(Collection)) as cur:
        await cur.execute(LIST_SQL)
        return await cur.fetchall()


async def create_embedding_set(
    conn: psycopg.AsyncConnection, collection_id: int, model: str, dimensions: int, *, active: bool
) -> int:
    """A set of embeddings for one model, with its own HNSW index."""
    async with conn.transaction():
        await lock_catalog(conn)
        set_id: int = await scalar(
            conn,
            INSERT_SET_SQL,
            (collection_id, model, dimensions, "active" if active else "building"),
        )
        await conn.execute(ENSURE_INDEX_SQL, (set_id,))
        if active:
            await _activate(conn, collection_id, set_id)
    return set_id


async def _activate(conn: psycopg.AsyncConnection, collection_id: int, set_id: int) -> None:
    for statement in ACTIVATE_SQL:
        await conn.execute(statement, {"cid": collection_id, "sid": set_id})


async def activate_embedding_set(
    conn: psycopg.AsyncConnection, collection_id: int, set_id: int
) -> None:
    """Switch searches to another set atomically; the old one is kept as `retired`."""
    async with conn.transaction():
        await lock_catalog(conn)
        await _activate(conn, collection_id, set_id)


async def ensure_collection(
    conn: psycopg.AsyncConnection, name: str, provider: Embedder, dimensions: int
) -> Collection:
    """Get or create a collection bound to the provider's model; refuse a model mismatch."""
    try:
        col = await get_collection(conn, name)
    except NotFound:
        async with conn.transaction():
            await lock_catalog(conn)
            await conn.execute(INSERT_COLLECTION_SQL, (name,))
            col = await get_collection(conn, name)
    if col.set_id is None:
        await create_embedding_set(conn, col.id, provider.model, dimensions, active=True)
        return await get_collection(conn, name)
    check_model(col, provider.model, dimensions)
    return col


def check_model(col: Collection, model: str, dimensions: int) -> None:
    if col.model != model or col.dimensions != dimensions:
        raise dimension_mismatch(col.name, col.model or "?", col.dimensions or 0, model, dimensions)


def dimension_mismatch(
    collection: str, stored_model: str, stored_dims: int, model: str, dims: int
) -> PgragError:
    """The error for a collection embedded by another model: names both and the fix."""
    return InvalidArgument(
        f"collection '{collection}' holds {stored_dims}-dimension embeddings from {stored_model}, "
        f"but the configured model {model} produces {dims}: run "
        f"`pgrag reindex --collection {collection} --model {model}` to re-embed it, "
        f"or set PGRAG_EMBEDDING_MODEL={stored_model}.",
        detail={
            "stored_model": stored_model,
            "stored_dimensions": stored_dims,
            "model": model,
            "dimensions": dims,
        },
    )
