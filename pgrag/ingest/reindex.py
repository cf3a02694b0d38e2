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
from typing import Literal

import psycopg
from psycopg_pool import AsyncConnectionPool

from pgrag.embeddings.base import EmbeddingProvider
from pgrag.embeddings.cache import embed_passages_cached
from pgrag.errors import ErrorCode, InvalidArgument, PgragError
from pgrag.ingest.context import embed_text
from pgrag.store import reindex as store
from pgrag.store import vector_index
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


@dataclass(frozen=True)
class ReindexEvent:
    kind: Literal["start", "batch", "switch", "drop"]
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
        self.total = await store.chunk_count(self.conn, self.collection_id)
        self.done = await store.embedded_count(self.conn, self.collection_id, self.result.set_id)

    async def fill(self) -> int:
        """One pass over the chunks missing from the set; returns how many it added."""
        added, after = 0, 0
        while rows := await self._missing(after):
            after = rows[-1][0]
            added += await self._embed_batch(rows)
        return added

    async def _missing(self, after: int) -> list[tuple[int, str | None, str | None, str]]:
        return await store.missing_chunks(
            self.conn, self.collection_id, self.result.set_id, after, self.batch
        )

    async def _embed_batch(self, rows: list[tuple[int, str | None, str | None, str]]) -> int:
        texts = [embed_text(heading, context, content) for _, heading, context, content in rows]
        vectors, computed = await embed_passages_cached(self.conn, self.provider, texts)
        ids = [r[0] for r in rows]
        async with self.conn.transaction():
            added = await store.insert_vectors(
                self.conn, self.collection_id, self.result.set_id, ids, list(vectors)
            )
        self.result.embedded += computed
        self.result.from_cache += len(rows) - computed
        self.done += added
        self.total = max(self.total, self.done)
        self.report(ReindexEvent("batch", self.done, self.total))
        return added


async def prepare_set(
    conn: psycopg.AsyncConnection, collection_id: int, model: str, dimensions: int
) -> int:
    """The model's set, as `building`: new, resumed, or a retired one brought back (its
    vectors are still right for the chunks that exist; chunks never change in place).
    A set left with other dimensions (e.g. PGRAG_EMBEDDING_DIMENSIONS changed) starts over:
    index dropped first, rows deleted after, each step safe to interrupt and repeat."""
    found = await store.find_set(conn, collection_id, model)
    if found is not None and found[1] != dimensions:
        log.info("embedding set %s had %s dimensions, now %s: rebuilding", *found, dimensions)
        await vector_index.drop(conn, found[0], concurrently=True)
        await store.delete_set_rows(conn, collection_id, found[0])
    set_id = await create_embedding_set(conn, collection_id, model, dimensions, active=False)
    await store.mark_building(conn, set_id)
    return set_id


async def _switch(run: _Run) -> None:
    """Embed the last chunks and activate the set with ingestion held back."""
    conn = run.conn
    async with conn.transaction():
        run.result.previous_set_id = await store.lock_collection(conn, run.collection_id)
        await run.fill()
        run.result.chunks = await store.embedded_count(conn, run.collection_id, run.result.set_id)
        await store.clear_vectors_pending(conn, run.collection_id)
        await activate_embedding_set(conn, run.collection_id, run.result.set_id)
    run.result.switched = True
    run.report(ReindexEvent("switch", run.done, run.total))


async def drop_retired(conn: psycopg.AsyncConnection, collection_id: int) -> tuple[int, ...]:
    """Delete the collection's retired sets: the index first and without blocking anyone, so
    an interruption never leaves an index whose set is gone; a re-run finishes the job."""
    dropped: list[int] = []
    for set_id in await store.retired_sets(conn, collection_id):
        await vector_index.drop(conn, set_id, concurrently=True)
        async with conn.transaction():
            await store.delete_set_rows(conn, collection_id, set_id)
            await store.delete_retired_set(conn, set_id)
        dropped.append(set_id)
    return tuple(dropped)


async def _locked(conn: psycopg.AsyncConnection, col: Collection) -> None:
    if not await store.try_lock(conn, col.id):
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
            await store.unlock(conn, collection_id)
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
    dims = await provider.probe_dimensions()
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
