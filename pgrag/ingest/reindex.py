"""Online re-embedding: embed a collection's chunks with another model into a `building`
embedding set while searches keep using the active one, then switch atomically.

Each batch commits on its own, so an interrupted run keeps its work and the next run embeds
only what is missing (and the embedding cache makes even a lost batch cheap). The switch
takes the collection row `FOR UPDATE` - which waits for in-flight document writes (their
chunk inserts hold a key-share lock on it) and holds new ones back - embeds what they added,
and activates the new set in the same transaction, so the new set covers every chunk the
moment searches see it.

Dropping the replaced set happens after that transaction commits: deleting its rows inside
it would wait for a re-ingestion that holds those rows while it waits for the collection
row, a deadlock. `DROP INDEX CONCURRENTLY` then never blocks searches or ingestion.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from pgrag.embeddings.base import EmbeddingProvider
from pgrag.embeddings.cache import embed_passages_cached
from pgrag.errors import ErrorCode, InvalidArgument, PgragError
from pgrag.ingest.context import embed_text
from pgrag.store.collections import (
    Collection,
    activate_embedding_set,
    create_embedding_set,
    get_collection,
)
from pgrag.store.documents import compact_language_sums, recount_language_sums

log = logging.getLogger(__name__)

# catch-up passes before the switch; whatever ingestion adds after them is embedded inside
# the switch transaction (with ingestion held back)
CATCH_UP_PASSES = 5

# one reindex per collection at a time (session lock, released at the end or on disconnect)
TRY_LOCK_SQL = "SELECT pg_try_advisory_lock(hashtextextended('pgrag.reindex', %s))"
UNLOCK_SQL = "SELECT pg_advisory_unlock(hashtextextended('pgrag.reindex', %s))"

FIND_SET_SQL = """
SELECT id, dimensions FROM pgrag.embedding_sets WHERE collection_id = %s AND model = %s
"""
TO_BUILDING_SQL = (
    "UPDATE pgrag.embedding_sets SET state = 'building' WHERE id = %s AND state <> 'active'"
)
DROP_INDEX_SQL = "DROP INDEX {concurrently} IF EXISTS pgrag.{index}"

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

LOCK_COLLECTION_SQL = "SELECT active_set_id FROM pgrag.collections WHERE id = %s FOR UPDATE"
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


@dataclass(frozen=True)
class ReindexEvent:
    kind: str  # "start" | "batch" | "switch" | "drop"
    done: int = 0  # chunks of the collection with an embedding in the new set
    total: int = 0  # chunks of the collection (grows if ingestion adds some meanwhile)


Reporter = Callable[[ReindexEvent], None]


@dataclass
class ReindexResult:
    collection: str
    set_id: int
    model: str
    dimensions: int
    chunks: int = 0  # chunks embedded in the new set when it was activated
    resumed: int = 0  # already in the set from an earlier, interrupted run (or a retired set)
    embedded: int = 0  # texts the model embedded in this run
    from_cache: int = 0  # chunks whose vectors came from the embedding cache
    previous_set_id: int | None = None
    previous_model: str | None = None
    switched: bool = False
    dropped_set_ids: tuple[int, ...] = ()


def _quiet(_: ReindexEvent) -> None:
    pass


def index_name(set_id: int) -> str:
    """The name pgrag.ensure_embedding_index gives a set's HNSW index."""
    return f"embeddings_hnsw_{set_id}"


async def provider_dimensions(provider: EmbeddingProvider) -> int:
    probe = getattr(provider, "probe_dimensions", None)
    return int(await probe()) if probe is not None else provider.dimensions


class _Run:
    """The state of one reindex: the connection it holds, the set it fills, its counts."""

    def __init__(
        self,
        conn: psycopg.AsyncConnection,
        provider: EmbeddingProvider,
        result: ReindexResult,
        collection_id: int,
        batch: int,
        report: Reporter,
    ) -> None:
        self.conn = conn
        self.provider = provider
        self.result = result
        self.collection_id = collection_id
        self.batch = batch
        self.report = report
        self.done = 0
        self.total = 0

    async def count(self) -> None:
        self.total = await _scalar(self.conn, COUNT_CHUNKS_SQL, (self.collection_id,))
        self.done = await _scalar(
            self.conn, COUNT_DONE_SQL, (self.collection_id, self.result.set_id)
        )

    async def fill(self) -> int:
        """One pass over the chunks missing from the set; returns how many it added."""
        added, after = 0, 0
        while rows := await self._missing(after):
            after = rows[-1][0]
            added += await self._embed_batch(rows)
        return added

    async def _missing(self, after: int) -> list[tuple[int, str | None, str | None, str]]:
        params = {
            "cid": self.collection_id,
            "sid": self.result.set_id,
            "after": after,
            "limit": self.batch,
        }
        return await (await self.conn.execute(MISSING_SQL, params)).fetchall()

    async def _embed_batch(self, rows: list[tuple[int, str | None, str | None, str]]) -> int:
        texts = [embed_text(heading, context, content) for _, heading, context, content in rows]
        vectors, computed = await embed_passages_cached(self.conn, self.provider, texts)
        params = {
            "cid": self.collection_id,
            "sid": self.result.set_id,
            "ids": [r[0] for r in rows],
            "vectors": list(vectors),
        }
        async with self.conn.transaction():
            added = (await self.conn.execute(INSERT_SQL, params)).rowcount
        self.result.embedded += computed
        self.result.from_cache += len(rows) - computed
        self.done += added
        self.total = max(self.total, self.done)
        self.report(ReindexEvent("batch", self.done, self.total))
        return added


async def _scalar(conn: psycopg.AsyncConnection, query: str, params: tuple[object, ...]) -> int:
    row = await (await conn.execute(query, params)).fetchone()
    return int(row[0]) if row else 0


async def _drop_index(conn: psycopg.AsyncConnection, set_id: int, *, concurrently: bool) -> None:
    statement = sql.SQL(DROP_INDEX_SQL).format(
        concurrently=sql.SQL("CONCURRENTLY" if concurrently else ""),
        index=sql.Identifier(index_name(set_id)),
    )
    await conn.execute(statement)


async def prepare_set(
    conn: psycopg.AsyncConnection, collection_id: int, model: str, dimensions: int
) -> int:
    """The model's set, as `building`: new, resumed, or a retired one brought back (its
    vectors are still right for the chunks that exist; chunks never change in place).
    A set left with other dimensions (e.g. PGRAG_EMBEDDING_DIMENSIONS changed) starts over:
    index dropped first, rows deleted after, each step safe to interrupt and repeat."""
    row = await (await conn.execute(FIND_SET_SQL, (collection_id, model))).fetchone()
    if row is not None and row[1] != dimensions:
        log.info("embedding set %s had %s dimensions, now %s: rebuilding", *row, dimensions)
        await _drop_index(conn, row[0], concurrently=True)
        await conn.execute(DELETE_SET_ROWS_SQL, (collection_id, row[0]))
    set_id = await create_embedding_set(conn, collection_id, model, dimensions, active=False)
    await conn.execute(TO_BUILDING_SQL, (set_id,))
    return set_id


async def _switch(run: _Run) -> None:
    """Embed the last chunks and activate the set with ingestion held back."""
    conn = run.conn
    async with conn.transaction():
        row = await (await conn.execute(LOCK_COLLECTION_SQL, (run.collection_id,))).fetchone()
        run.result.previous_set_id = row[0] if row else None
        await run.fill()
        run.result.chunks = await _scalar(
            conn, COUNT_DONE_SQL, (run.collection_id, run.result.set_id)
        )
        await conn.execute(NONE_PENDING_SQL, (run.collection_id,))
        await activate_embedding_set(conn, run.collection_id, run.result.set_id)
    run.result.switched = True
    run.report(ReindexEvent("switch", run.done, run.total))


async def drop_retired(conn: psycopg.AsyncConnection, collection_id: int) -> tuple[int, ...]:
    """Delete the collection's retired sets: the index first and without blocking anyone, so
    an interruption never leaves an index whose set is gone; a re-run finishes the job."""
    rows = await (await conn.execute(RETIRED_SQL, (collection_id,))).fetchall()
    dropped: list[int] = []
    for (set_id,) in rows:
        await _drop_index(conn, set_id, concurrently=True)
        async with conn.transaction():
            await conn.execute(DELETE_SET_ROWS_SQL, (collection_id, set_id))
            await conn.execute(DELETE_SET_SQL, (set_id,))
        dropped.append(set_id)
    return tuple(dropped)


async def _locked(conn: psycopg.AsyncConnection, col: Collection) -> None:
    if not await _scalar(conn, TRY_LOCK_SQL, (col.id,)):
        raise PgragError(
            f"a reindex of collection '{col.name}' is already running; wait for it to finish",
            code=ErrorCode.PROCESSING,
            detail={"collection": col.name},
        )


async def _same_model(
    conn: psycopg.AsyncConnection, col: Collection, model: str, drop_old: bool
) -> ReindexResult:
    """Nothing to embed. With drop_old, finish the drop of an interrupted run if one is left."""
    dropped = await drop_retired(conn, col.id) if drop_old else ()
    if not dropped:
        raise InvalidArgument(
            f"collection '{col.name}' is already embedded with {model}; "
            "choose another model to reindex to",
            detail={"collection": col.name, "model": model},
        )
    assert col.set_id is not None and col.dimensions is not None
    return ReindexResult(
        col.name, col.set_id, model, col.dimensions, switched=False, dropped_set_ids=dropped
    )


async def _unlock(conn: psycopg.AsyncConnection, collection_id: int) -> None:
    """Release the run's lock; a connection in an unknown state is closed instead, which
    releases it too (the pool would otherwise hand it out still holding the lock)."""
    try:
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            await conn.execute(UNLOCK_SQL, (collection_id,))
            return
    except psycopg.Error:
        pass
    await conn.close()


async def _rebuild(
    conn: psycopg.AsyncConnection,
    col: Collection,
    provider: EmbeddingProvider,
    batch: int,
    report: Reporter,
) -> ReindexResult:
    dims = await provider_dimensions(provider)
    set_id = await prepare_set(conn, col.id, provider.model, dims)
    result = ReindexResult(col.name, set_id, provider.model, dims, previous_model=col.model)
    run = _Run(conn, provider, result, col.id, batch, report)
    await run.count()
    result.resumed = run.done
    report(ReindexEvent("start", run.done, run.total))
    await run.fill()
    for _ in range(CATCH_UP_PASSES):
        if not await run.fill():
            break
    await _switch(run)
    return result


async def reindex(
    pool: AsyncConnectionPool,
    collection: str,
    provider: EmbeddingProvider,
    *,
    batch: int = 64,
    drop_old: bool = False,
    reporter: Reporter | None = None,
) -> ReindexResult:
    """Re-embed every chunk of the collection with the provider's model and switch to it;
    with drop_old, delete the retired sets afterwards."""
    if batch < 1:
        raise InvalidArgument("batch must be at least 1", detail={"batch": batch})
    report = reporter or _quiet
    async with pool.connection() as conn:
        col = await get_collection(conn, collection)
        await _locked(conn, col)
        try:
            col = await get_collection(conn, collection)  # as of holding the lock
            if col.model == provider.model:
                return await _same_model(conn, col, provider.model, drop_old)
            result = await _rebuild(conn, col, provider, batch, report)
            if drop_old:
                result.dropped_set_ids = await drop_retired(conn, col.id)
                report(ReindexEvent("drop", result.chunks, result.chunks))
            await recount_language_sums(conn, col.id)  # batches split documents
            await compact_language_sums(conn, None)  # a dropped set's go
            return result
        finally:
            await _unlock(conn, col.id)
