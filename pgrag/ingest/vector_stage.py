"""The second phase of ingestion: vectors for chunks that are already committed.

The writer loop commits each document version's chunks at once (keyword search works) and
hands the chunks without a cached vector to this stage, which runs beside it as one task:
it gathers chunks across documents in arrival order into rounds of several provider
batches, sorts each round by length (batches pad little), embeds (the provider decides its
threads; the embedding cache first, so text embedded before with the same model is never
embedded again) and writes each document's vectors once all of them are computed (one
short transaction per document, store/vectors). So later files are parsed and written
while earlier ones are embedded, and no document waits for another's vectors to be
searchable. A crash loses nothing: `documents.vectors_pending` says what the next run
(`Ingestor.resume`) still has to embed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from uuid import UUID

import numpy as np
import psycopg
from psycopg_pool import AsyncConnectionPool

from pgrag.embeddings import cache
from pgrag.embeddings.base import EmbeddingProvider
from pgrag.errors import ErrorCode, PgragError
from pgrag.ingest.results import FileResult, IngestEvent, Outcome, Reporter
from pgrag.store import vector_batches
from pgrag.store import vectors as store

log = logging.getLogger(__name__)

ROUND_BATCHES = 4  # provider batches per round: enough texts to keep every thread busy
MIN_ROUND = 64


@dataclass(frozen=True)
class PendingChunk:
    id: int
    text: str  # what the model embeds (heading and content)
    tokens: int


@dataclass
class PendingDocument:
    """A written version's chunks still without a vector, and the result it reports into."""

    document_id: UUID
    chunks: list[PendingChunk]
    result: FileResult
    vectors: dict[int, np.ndarray] = field(default_factory=dict)
    taken: int = 0  # chunks handed to a round so far


class VectorStage:
    """Embeds and writes the vectors of queued documents until closed; see the module."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        provider: EmbeddingProvider,
        ids: tuple[int, int],  # collection, embedding set
        report: Reporter,
    ) -> None:
        self.pool = pool
        self.provider = provider
        self.collection_id, self.set_id = ids
        self.report = report
        self.inbox: asyncio.Queue[PendingDocument | None] = asyncio.Queue()
        self.queued: list[PendingDocument] = []
        self.failure: PgragError | None = None  # the provider failed: the rest waits
        self.round_size = max(provider.batch_size * ROUND_BATCHES, MIN_ROUND)
        self.total = 0
        self.done = 0
        self.stopped = False

    def add(self, doc: PendingDocument) -> None:
        self.total += len(doc.chunks)
        doc.result.vectors_pending = len(doc.chunks)
        self.inbox.put_nowait(doc)

    def close(self) -> None:
        self.inbox.put_nowait(None)

    def stop(self) -> None:
        """Stop after the current step, even if a cancellation was lost on the way (Python
        3.11's asyncio.wait_for can swallow one, e.g. in the pool's getconn)."""
        self.stopped = True
        self.close()

    async def run(self) -> None:
        closing = False
        while (self.queued or not closing) and not self.stopped:
            if not self.queued:
                item = await self.inbox.get()
                if item is None:
                    closing = True
                    continue
                await self._take(item)
            while not self.inbox.empty():
                item = self.inbox.get_nowait()
                if item is None:
                    closing = True
                else:
                    await self._take(item)
            if self.queued and not self.stopped:
                await self._round()

    async def _take(self, doc: PendingDocument) -> None:
        for old in [d for d in self.queued if d.document_id == doc.document_id]:
            # a newer version replaced these chunks: nothing of the old one is left to embed
            self.queued.remove(old)
            old.result.vectors_pending = 0
            self.done += len(old.chunks)
        if self.failure is not None:
            await self._give_up(doc, self.failure)
        elif not doc.chunks:
            await self._write(doc)
        else:
            self.queued.append(doc)

    async def _round(self) -> None:
        batch: list[tuple[PendingDocument, PendingChunk]] = []
        for doc in self.queued:
            while doc.taken < len(doc.chunks) and len(batch) < self.round_size:
                batch.append((doc, doc.chunks[doc.taken]))
                doc.taken += 1
        batch.sort(key=lambda item: item[1].tokens)
        for doc in {id(d): d for d, _ in batch}.values():
            self.report(
                IngestEvent("embed", doc.result.path, total=len(doc.chunks), done=doc.taken)
            )
        try:
            vectors, computed = await self._embed([c.text for _, c in batch])
        except Exception as exc:
            failure = exc if isinstance(exc, PgragError) else None
            if failure is None:  # a provider bug: this run's vectors wait, the run goes on
                log.exception("embedding passages failed")
                failure = PgragError(f"{type(exc).__name__}: {exc}", code=ErrorCode.INTERNAL)
            self.failure = failure
            for doc in list(self.queued):
                await self._give_up(doc, failure)
            self.queued.clear()
            return
        for (doc, chunk), vector, fresh in zip(batch, vectors, computed, strict=True):
            doc.vectors[chunk.id] = vector
            doc.result.embedded += fresh
        complete = [d for d in self.queued if d.taken == len(d.chunks)]
        self.queued = [d for d in self.queued if d.taken < len(d.chunks)]
        if len(complete) > 1:
            await self._write_many(complete)
        elif complete:
            await self._write(complete[0])

    async def _embed(self, texts: list[str]) -> tuple[list[np.ndarray], list[bool]]:
        """Vectors of the texts, from the cache where known; and which were computed. No
        connection is held while the model runs."""
        key = cache.cache_key(self.provider)
        hashes = [cache.content_hash(t) for t in texts]
        async with self.pool.connection() as conn:
            known = await cache.lookup(conn, key, list(set(hashes)))
        missing = {h: t for h, t in zip(hashes, texts, strict=True) if h not in known}
        if missing:
            fresh = await self.provider.embed_passages(list(missing.values()))
            computed = dict(zip(missing, fresh, strict=True))
            async with self.pool.connection() as conn:
                await cache.store(conn, key, computed)
            known.update(computed)
        return [known[h] for h in hashes], [h in missing for h in hashes]

    async def _write(self, doc: PendingDocument) -> None:
        ids = (self.collection_id, self.set_id, doc.document_id)
        try:
            async with self.pool.connection() as conn:
                pending = await store.write_vectors(conn, ids, doc.vectors)
        except (psycopg.DataError, psycopg.IntegrityError, psycopg.InternalError) as exc:
            # e.g. vectors of another size than the set's: rolled back, the chunks stay
            # searchable by keyword and the next run tries again
            error = PgragError(
                f"the database refused these vectors: {exc}", code=ErrorCode.DB_ERROR
            )
            await self._give_up(doc, error)
            return
        self._written(doc, pending)

    async def _write_many(self, docs: list[PendingDocument]) -> None:
        """Small documents (a table's rows) all at once: one transaction, a few statements."""
        key = (self.collection_id, self.set_id)
        try:
            async with self.pool.connection() as conn:
                found = await vector_batches.write_vectors_many(
                    conn, key, {d.document_id: d.vectors for d in docs}
                )
        except (psycopg.DataError, psycopg.IntegrityError, psycopg.InternalError):
            for doc in docs:  # one at a time: the document the database refuses gives up alone
                await self._write(doc)
            return
        for doc in docs:
            self._written(doc, found[doc.document_id])

    def _written(self, doc: PendingDocument, pending: int | None) -> None:
        if pending is None:  # deleted meanwhile (e.g. by the REST API)
            doc.result.outcome, doc.result.error_code = Outcome.FAILED, str(ErrorCode.NOT_FOUND)
            doc.result.error = (
                "the document was deleted while its vectors were computed; ingest the file "
                "again to add it back"
            )
        doc.result.vectors_pending = pending or 0
        self.done += len(doc.chunks)
        self.report(IngestEvent("vectors", doc.result.path, total=self.total, done=self.done))

    async def _give_up(self, doc: PendingDocument, error: PgragError) -> None:
        """The document stays searchable by keyword; why its vectors wait is recorded, and
        the next run (or `pgrag serve`) computes them."""
        result = doc.result
        result.error_code, result.error = str(error.code), error.message
        if result.outcome in (Outcome.ADDED, Outcome.UPDATED):
            result.outcome = Outcome.PENDING
        async with self.pool.connection() as conn:
            await store.mark_waiting(
                conn, self.collection_id, doc.document_id, str(error.code), error.message
            )
        self.done += len(doc.chunks)
        self.report(IngestEvent("vectors", result.path, total=self.total, done=self.done))


@contextlib.asynccontextmanager
async def running_stage(
    pool: AsyncConnectionPool,
    provider: EmbeddingProvider,
    key: tuple[int, int],
    report: Reporter,
) -> AsyncIterator[VectorStage]:
    """The embedding task beside a writer (collection id, embedding set id); leaving waits
    until it has written every queued document's vectors (an error or a cancellation stops
    it at once)."""
    stage = VectorStage(pool, provider, key, report)
    task = asyncio.create_task(stage.run())
    try:
        yield stage
    except BaseException:
        stage.stop()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise
    stage.close()
    await task
