"""The SQL of online re-embedding (pgrag/ingest/reindex.py): the per-collection lock, the
`building` set, the chunks missing from it, their vectors, the switch and retired sets."""

from __future__ import annotations

import psycopg

from pgrag.store.collections import lock_catalog

# one reindex per collection at a time (session lock, released at the end or on disconnect)
TRY_LOCK_SQL = "SELECT pg_try_advisory_lock(hashtextextended('pgrag.reindex', %s))"
UNLOCK_SQL = "SELECT pg_advisory_unlock(hashtextextended('pgrag.reindex', %s))"

FIND_SET_SQL = """
SELECT id, dimensions FROM pgrag.embedding_sets WHERE collection_id = %s AND model = %s
"""
TO_BUILDING_SQL = (
    "UPDATE pgrag.embedding_sets SET state = 'building' WHERE id = %s AND state <> 'active'"
)

COUNT_CHUNKS_SQL = "SELECT count(*) FROM pgrag.chunks WHERE collection_id = %s"
# a set belongs to one collection; naming it keeps these on one shard on Citus (a
# statement over every shard cannot precede the switch's write to the reference tables)
COUNT_DONE_SQL = "SELECT count(*) FROM pgrag.embeddings WHERE collection_id = %s AND set_id = %s"

# keyset-paged, so a chunk that cannot be written now (see INSERT_SQL) ends the pass
MISSING_SQL = """
SELECT c.id, c.heading, c.context, c.content FROM pgrag.chunks c
WHERE c.collection_id = %(cid)s AND c.id > %(after)s
  AND NOT EXISTS (SELECT 1 FROM pgrag.embeddings e  -- collection_id: Citus's shard key
                  WHERE e.collection_id = c.collection_id AND e.set_id = %(sid)s
                    AND e.chunk_id = c.id)
ORDER BY c.id
LIMIT %(limit)s
"""

# Chunks that a concurrent re-ingestion is deleting are skipped rather than waited for:
# waiting inside the switch transaction would deadlock with that writer, and the chunks
# are going away anyway. The key-share lock keeps the rest alive until commit.
INSERT_SQL = """
WITH live AS (
    SELECT id, collection_id, document_id, lang FROM pgrag.chunks
    WHERE collection_id = %(cid)s AND id = ANY(%(ids)s) FOR KEY SHARE SKIP LOCKED
)
INSERT INTO pgrag.embeddings (collection_id, set_id, chunk_id, embedding, lang, document_id)
SELECT live.collection_id, %(sid)s, e.chunk_id, e.embedding, coalesce(live.lang, 'und'),
       live.document_id
FROM unnest(%(ids)s::bigint[], %(vectors)s::vector[]) AS e(chunk_id, embedding)
JOIN live ON live.id = e.chunk_id
ON CONFLICT DO NOTHING
"""

ACTIVE_SET_SQL = "SELECT active_set_id FROM pgrag.collections WHERE id = %s"
LOCK_COLLECTION_SQL = ACTIVE_SET_SQL + " FOR UPDATE"
# Writers and a reindex switch meet on a transaction-level advisory lock per collection
# (writers shared, the switch exclusive), not on the collection row: on Citus a row lock on
# a reference table takes two shard locks in turn, and two concurrent writers holding the
# first deadlock on the second.
SWITCH_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtextextended('pgrag.active_set', %s))"
WRITER_LOCK_SQL = "SELECT pg_advisory_xact_lock_shared(hashtextextended('pgrag.active_set', %s))"
# the new set covers every chunk: no document waits for vectors any more (and the reason
# one waited, e.g. the old provider down, goes with it)
NONE_PENDING_SQL = """
UPDATE pgrag.documents
   SET vectors_pending = 0,
       error_code = CASE WHEN status = 'ready' THEN NULL ELSE error_code END,
       error_detail = CASE WHEN status = 'ready' THEN NULL ELSE error_detail END
 WHERE collection_id = %s AND vectors_pending > 0
"""
RETIRED_SQL = """
SELECT id FROM pgrag.embedding_sets
WHERE collection_id = %s AND state = 'retired' ORDER BY id
"""
DELETE_SET_ROWS_SQL = "DELETE FROM pgrag.embeddings WHERE collection_id = %s AND set_id = %s"
DELETE_SET_SQL = "DELETE FROM pgrag.embedding_sets WHERE id = %s AND state = 'retired'"


async def _scalar(conn: psycopg.AsyncConnection, query: str, params: tuple[object, ...]) -> int:
    row = await (await conn.execute(query, params)).fetchone()
    return int(row[0]) if row else 0


async def try_lock(conn: psycopg.AsyncConnection, collection_id: int) -> bool:
    """Take the collection's reindex lock for this session, unless another run holds it."""
    return bool(await _scalar(conn, TRY_LOCK_SQL, (collection_id,)))


async def unlock(conn: psycopg.AsyncConnection, collection_id: int) -> None:
    await conn.execute(UNLOCK_SQL, (collection_id,))


async def find_set(
    conn: psycopg.AsyncConnection, collection_id: int, model: str
) -> tuple[int, int] | None:
    """(id, dimensions) of the collection's set for `model`, if there is one."""
    row = await (await conn.execute(FIND_SET_SQL, (collection_id, model))).fetchone()
    return (int(row[0]), int(row[1])) if row else None


async def mark_building(conn: psycopg.AsyncConnection, set_id: int) -> None:
    async with conn.transaction():
        await lock_catalog(conn)
        await conn.execute(TO_BUILDING_SQL, (set_id,))


async def chunk_count(conn: psycopg.AsyncConnection, collection_id: int) -> int:
    return await _scalar(conn, COUNT_CHUNKS_SQL, (collection_id,))


async def embedded_count(conn: psycopg.AsyncConnection, collection_id: int, set_id: int) -> int:
    return await _scalar(conn, COUNT_DONE_SQL, (collection_id, set_id))


async def missing_chunks(
    conn: psycopg.AsyncConnection, collection_id: int, set_id: int, after: int, limit: int
) -> list[tuple[int, str | None, str | None, str]]:
    """(id, heading, context, content) of up to `limit` chunks past id `after` without a vector in
    the set."""
    params = {"cid": collection_id, "sid": set_id, "after": after, "limit": limit}
    return await (await conn.execute(MISSING_SQL, params)).fetchall()


async def insert_vectors(
    conn: psycopg.AsyncConnection,
    collection_id: int,
    set_id: int,
    ids: list[int],
    vectors: list[object],
) -> int:
    """Write the chunks' vectors into the set; returns how many were written."""
    params = {"cid": collection_id, "sid": set_id, "ids": ids, "vectors": vectors}
    return (await conn.execute(INSERT_SQL, params)).rowcount


async def lock_collection(conn: psycopg.AsyncConnection, collection_id: int) -> int | None:
    """Hold the collection's writers back until the transaction ends (the writers' lock,
    and the row against any other write that references it); returns its active set id.
    The catalog lock comes first: the switch writes the reference tables at its end."""
    await lock_catalog(conn)
    await conn.execute(SWITCH_LOCK_SQL, (collection_id,))
    row = await (await conn.execute(LOCK_COLLECTION_SQL, (collection_id,))).fetchone()
    return row[0] if row else None


async def clear_vectors_pending(conn: psycopg.AsyncConnection, collection_id: int) -> None:
    await conn.execute(NONE_PENDING_SQL, (collection_id,))


async def retired_sets(conn: psycopg.AsyncConnection, collection_id: int) -> list[int]:
    rows = await (await conn.execute(RETIRED_SQL, (collection_id,))).fetchall()
    return [int(r[0]) for r in rows]


async def delete_set_rows(conn: psycopg.AsyncConnection, collection_id: int, set_id: int) -> None:
    await conn.execute(DELETE_SET_ROWS_SQL, (collection_id, set_id))


async def delete_retired_set(conn: psycopg.AsyncConnection, set_id: int) -> None:
    await lock_catalog(conn)
    await conn.execute(DELETE_SET_SQL, (set_id,))
