"""Draining the queue of table sources: each changed row becomes its document again.

A batch is one transaction: claim queue entries (FOR UPDATE SKIP LOCKED, so several
drainers share a queue), take each row's advisory lock (a row another drainer holds keeps
its entries for later), read the rows as they are now, write each changed row's document
version (keyword-searchable at commit, with the vectors the embedding cache knows), delete
the documents of rows that are gone, and delete the claimed entries, all in the same
transaction: a crash before the commit leaves the entries queued, and after it nothing is
left to redo. A row whose derived text hash is unchanged is not written (its metadata is
updated if it changed): no chunking, no embedding. The vectors follow in the vector stage,
as for files; `documents.vectors_pending` resumes them after a crash.

The backfill queues the existing rows in keyset batches (a cursor in the source's row,
moved in the same statement) whenever the queue is short, so a crash resumes it. A large
backfill into a smaller collection drops the collection's vector index first and builds it
once at the end (ingest/backfill_index.py): its vectors skip walking a growing graph.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import psycopg
from psycopg_pool import AsyncConnectionPool

from pgrag.embeddings import cache
from pgrag.embeddings.base import EmbeddingProvider
from pgrag.errors import ErrorCode
from pgrag.ingest.backfill_index import BackfillIndex, IndexPolicy
from pgrag.ingest.pipeline import Ingestor
from pgrag.ingest.results import FileResult, IngestEvent, Outcome
from pgrag.ingest.table_rows import Chunking, RowVersion, failed_row, row_path, row_version
from pgrag.ingest.vector_stage import PendingChunk, PendingDocument, VectorStage, running_stage
from pgrag.store import bm25_sums, removals
from pgrag.store import document_batches as batches
from pgrag.store import documents as doc_store
from pgrag.store import table_sources as store
from pgrag.store.collections import Collection, ensure_collection, get_collection
from pgrag.store.table_sources import SourceRow, TableRow, key_text

log = logging.getLogger(__name__)

BATCH = 500  # queue entries per transaction: a backfill step
BACKFILL_STEP = 500  # keys the backfill queues at a time (when the queue is drained)
REMOVE_STEP = 500  # documents a removal deletes per transaction
# SQLSTATE classes that say the table cannot be read as registered (a column or type gone,
# a value that cannot be read, no privilege): the source is marked failed with the reason
TABLE_ERRORS = ("42", "22", "0A", "2B")
# a character the client encoding has no equivalent for, or bytes invalid in the encoding
ENCODING_STATES = ("22021", "22P05")


@dataclass
class SourceProgress:
    """What one drain did for one source (and, while backfilling, how far it is)."""

    name: str
    written: int = 0
    unchanged: int = 0
    removed: int = 0
    failed: int = 0  # rows that could not become a document (recorded with their reason)
    entries: int = 0
    failure: str | None = None
    backfill_done: int = 0
    backfill_total: int | None = None
    started: float = field(default_factory=time.monotonic)

    def eta_seconds(self) -> float | None:
        """Seconds left of the backfill at the rate so far (None: unknown)."""
        elapsed = time.monotonic() - self.started
        total = self.backfill_total
        if not total or not self.backfill_done or elapsed <= 0:
            return None
        return max(total - self.backfill_done, 0) / (self.backfill_done / elapsed)


Progress = Callable[[SourceProgress], None]


def _quiet(_: SourceProgress) -> None:
    pass


@dataclass
class _Batch:
    entries: int = 0
    pending: list[PendingDocument] = field(default_factory=list)


class TableSync:
    """Drains table sources into their collections with one embedding provider."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        provider: EmbeddingProvider,
        chunking: Chunking,
        progress: Progress | None = None,
        index: IndexPolicy | None = None,
    ) -> None:
        self.pool = pool
        self.provider = provider
        self.chunking = chunking
        self.progress = progress or _quiet
        self.index = BackfillIndex(pool, index or IndexPolicy())
        self._collections: dict[str, Collection] = {}

    async def drain(
        self, name: str | None = None, *, wait_for_index: bool = True
    ) -> list[SourceProgress]:
        """Drain every source (or the one named) until its queue and backfill are done;
        and, unless told not to wait, until a vector index left to build is built."""
        async with self.pool.connection() as conn:
            found = await store.sources(conn, name)
        done = []
        for source in found:
            if source.state == "removed":
                await self._remove(source)
            elif source.state != "failed":
                done.append(await self._drain_source(source))
        if wait_for_index:
            await self.index.built()
        return done

    async def close(self) -> None:
        await self.index.close()

    async def _collection(self, name: str) -> Collection:
        if name not in self._collections:
            dims = await self.provider.probe_dimensions()
            async with self.pool.connection() as conn:
                self._collections[name] = await ensure_collection(conn, name, self.provider, dims)
        return self._collections[name]

    async def _drain_source(self, source: SourceRow) -> SourceProgress:
        progress = SourceProgress(source.name)
        col = await self._collection(source.collection)
        try:
            await self.index.defer(source, col)
            async with self._vector_stage(col) as stage:
                await self._loop(source, col, stage, progress)
            if progress.written or progress.removed:  # one row per language again
                async with self.pool.connection() as conn:
                    assert col.set_id is not None
                    await doc_store.compact_language_sums(conn, col.set_id)
                    await bm25_sums.compact(conn, col.id)
        except psycopg.Error as exc:
            if (exc.sqlstate or "")[:2] not in TABLE_ERRORS:
                raise  # the database went away, a deadlock...: the next drain retries
            reason = f"{type(exc).__name__}: {_first_line(exc)}"
            log.warning("table source %s failed: %s", source.name, reason)
            await self._fail(source, reason, progress)
        await self.index.settle(col)
        return progress

    async def _fail(self, source: SourceRow, reason: str, progress: SourceProgress) -> None:
        progress.failure = reason
        async with self.pool.connection() as conn:
            await store.fail(conn, source.id, reason)

    async def _loop(
        self, source: SourceRow, col: Collection, stage: VectorStage, progress: SourceProgress
    ) -> None:
        while True:
            async with self.pool.connection() as conn:
                problem = await store.problem(conn, source.id)
            if problem is not None:
                await self._fail(source, problem, progress)
                return
            batch = await self._batch(source, col, progress)
            for doc in batch.pending:
                stage.add(doc)
            if batch.entries:
                self.progress(progress)
                continue
            async with self.pool.connection() as conn:
                queued = await store.backfill(conn, source.id, BACKFILL_STEP)
                if queued:
                    await self._backfill_progress(conn, source, progress)
                    continue
                await store.synced(conn, source.id)
            return

    async def _backfill_progress(
        self, conn: psycopg.AsyncConnection, source: SourceRow, progress: SourceProgress
    ) -> None:
        progress.backfill_done, progress.backfill_total = await store.backfill_state(
            conn, source.id
        )
        self.progress(progress)

    async def _batch(self, source: SourceRow, col: Collection, progress: SourceProgress) -> _Batch:
        """One transaction: claimed entries in, documents out (see the module)."""
        out = _Batch()
        async with self.pool.connection() as conn:  # committed: other drainers share them
            await store.split(conn, source.id, BATCH)
        async with self.pool.connection() as conn, conn.transaction():
            claimed = await store.claim(conn, source.id, BATCH)
            if not claimed:
                return out
            keys = {key_text(c.key): c.key for c in claimed if c.key is not None}
            held = await store.lock_rows(conn, source.id, list(keys.values()))
            # another drainer's rows: queued again, for after its turn
            keep = sorted(
                {c.raw for c in claimed if c.key and c.raw and key_text(c.key) not in held}
            )
            out.entries = sum(1 for c in claimed if c.key is None or key_text(c.key) in held)
            if any(c.key is None for c in claimed):  # a TRUNCATE: rows gone without keys
                gone_ids = await store.orphans(conn, source.id, col.id)
                progress.removed += len(await removals.delete_documents(conn, col.id, gone_ids))
            current, unreadable = await _read(conn, source.id, [keys[t] for t in held])
            versions = await asyncio.to_thread(
                lambda: {t: row_version(source, r, self.chunking) for t, r in current.items()}
            )
            versions.update({t: failed_row(source, keys[t], f) for t, f in unreadable.items()})
            paths = {t: row_path(source, keys[t]) for t in held}
            known = await store.documents(conn, col.id, list(paths.values()))
            gone = [known[p].id for t, p in paths.items() if p in known and not versions.get(t)]
            if gone:
                progress.removed += len(await removals.delete_documents(conn, col.id, gone))
            changed = [v for v in versions.values() if v is not None]
            writes = [v for v in changed if not _unchanged(known.get(v.fields.path), v)]
            progress.unchanged += len(changed) - len(writes)
            same = [
                (known[v.fields.path], v)
                for v in changed
                if _unchanged(known.get(v.fields.path), v)
            ]
            await batches.set_metadata(
                conn,
                col.id,
                [(d.id, v.fields.metadata) for d, v in same if d.metadata != v.fields.metadata],
            )
            out.pending = await self._write(conn, source, col, writes, known)
            progress.written += sum(1 for v in writes if v.failure is None)
            progress.failed += sum(1 for v in writes if v.failure is not None)
            await store.unqueue(conn, source.id, sorted({c.entry for c in claimed}), keep)
            progress.entries += out.entries
        return out

    async def _write(
        self,
        conn: psycopg.AsyncConnection,
        source: SourceRow,
        col: Collection,
        writes: list[RowVersion],
        known: dict[str, store.RowDocument],
    ) -> list[PendingDocument]:
        """Write the rows' new versions (inside the batch's transaction, a few statements
        for the whole batch); their chunks still without a vector, for the vector stage."""
        assert col.set_id is not None
        hashes = {c.content_hash for v in writes for c in v.chunks}
        cached = await cache.lookup(conn, cache.cache_key(self.provider), list(hashes))
        batch = [
            batches.BatchVersion(
                v.fields,
                v.key,
                v.units,
                v.chunks,
                [cached.get(c.content_hash) for c in v.chunks],
                v.failure,
            )
            for v in writes
        ]
        replaced = [d.id for v in writes if (d := known.get(v.fields.path)) is not None]
        written = await batches.write_versions(
            conn, (col.id, col.set_id, source.id), batch, replaced
        )
        pending = []
        for b, v in zip(batch, writes, strict=True):
            w = written[v.fields.path]
            texts = v.embed_texts()
            missing = [
                PendingChunk(w.chunk_ids[i], texts[i], c.draft.token_count)
                for i, c in enumerate(v.chunks)
                if b.vectors[i] is None
            ]
            if missing:
                result = FileResult(v.fields.path, Outcome.UPDATED, chunks=len(v.chunks))
                pending.append(PendingDocument(w.document_id, missing, result))
        return pending

    def _vector_stage(self, col: Collection) -> AbstractAsyncContextManager[VectorStage]:
        """The embedding task beside the drain."""
        assert col.set_id is not None
        return running_stage(self.pool, self.provider, (col.id, col.set_id), _no_events)

    async def resume_vectors(self, collection: str) -> None:
        """The vectors a killed drain left missing in a source's collection."""
        await Ingestor(self.pool, self.provider, collection=collection).resume()

    async def _remove(self, source: SourceRow) -> None:
        """A removed source: delete its documents a step at a time, then forget it."""
        async with self.pool.connection() as conn:
            try:
                col_id: int | None = (await get_collection(conn, source.collection)).id
            except Exception:  # never indexed: no collection, no documents
                col_id = None
            while col_id is not None:
                ids: list[UUID] = await store.source_documents(conn, source.id, col_id, REMOVE_STEP)
                if not ids:
                    break
                await removals.delete_documents(conn, col_id, ids)
            await store.forget(conn, source.id)


def _no_events(_: IngestEvent) -> None:
    pass


async def _read(
    conn: psycopg.AsyncConnection, source_id: int, keys: list[dict[str, Any]]
) -> tuple[dict[str, TableRow], dict[str, tuple[str, str]]]:
    """The rows of these keys (by key_text), in one statement; when a value of one of them
    cannot be read (a cast or an encoding that fails: SQLSTATE class 22), row by row, each
    in a savepoint, and the failing rows with their (code, reason): they fail alone."""
    try:
        async with conn.transaction():
            return {key_text(r.key): r for r in await store.rows(conn, source_id, keys)}, {}
    except psycopg.DataError:
        pass
    rows: dict[str, TableRow] = {}
    failed: dict[str, tuple[str, str]] = {}
    for key in keys:
        try:
            async with conn.transaction():
                rows.update({key_text(r.key): r for r in await store.rows(conn, source_id, [key])})
        except psycopg.DataError as exc:
            code = (
                ErrorCode.ENCODING_ERROR if exc.sqlstate in ENCODING_STATES else ErrorCode.DB_ERROR
            )
            failed[key_text(key)] = (code, f"a value cannot be read: {_first_line(exc)}")
    return rows, failed


def _first_line(exc: psycopg.Error) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _unchanged(doc: store.RowDocument | None, v: RowVersion) -> bool:
    """The row's document already holds this text: nothing to chunk or embed."""
    return (
        doc is not None
        and v.failure is None
        and doc.content_hash == v.fields.content_hash
        and doc.status == "ready"
    )


def describe(p: SourceProgress) -> dict[str, Any]:
    """A drain's outcome as JSON (the CLI's --json)."""
    return {
        "source": p.name,
        "written": p.written,
        "unchanged": p.unchanged,
        "removed": p.removed,
        "failed_rows": p.failed,
        "queue_entries": p.entries,
        "failure": p.failure,
    }
