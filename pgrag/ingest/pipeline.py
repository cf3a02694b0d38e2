"""An ingestion run: walk, skip unchanged files, parse ahead in a thread, write each
document version in one transaction (searchable by keyword at once, with the vectors the
cache knows), embed the rest beside it (ingest/vector_stage), remove documents whose files
disappeared.

One bad file never stops the run: it ends `failed` with its reason. When the embedding
provider is down the document is searchable by keyword and ends `pending` with the reason;
the next run (or `pgrag serve`) embeds what is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
from psycopg_pool import AsyncConnectionPool

from pgrag import metrics
from pgrag.embeddings import cache
from pgrag.embeddings.base import EmbeddingProvider
from pgrag.errors import ErrorCode
from pgrag.ingest.files import FileTooLarge, UnsafeFile
from pgrag.ingest.parse_worker import ParseOptions, parse_file
from pgrag.ingest.parsers import SUPPORTED_EXTENSIONS
from pgrag.ingest.parsers.base import ParseError
from pgrag.ingest.parsers.limits import file_bound
from pgrag.ingest.prepare import PreparedDocument, base_fields
from pgrag.ingest.results import FileResult, IngestEvent, IngestSummary, Outcome, Reporter
from pgrag.ingest.vector_stage import PendingChunk, PendingDocument, VectorStage, running_stage
from pgrag.ingest.walker import FoundFile, walk
from pgrag.ingest.work import Failure, Work, pending_chunks
from pgrag.store import bm25_sums, interrupted, removals
from pgrag.store import documents as store
from pgrag.store import vectors as vector_store
from pgrag.store.collections import Collection, ensure_collection

if TYPE_CHECKING:
    from pgrag.ingest.ocr import OcrOptions

log = logging.getLogger(__name__)

# OCR_UNAVAILABLE and DB_SETUP: retried, so installing an engine (granting the privilege)
# and ingesting again reads the file
RETRYABLE_CODES = {
    ErrorCode.UPSTREAM_ERROR,
    ErrorCode.INTERNAL,
    ErrorCode.DB_ERROR,
    ErrorCode.DB_SETUP,
    ErrorCode.OCR_UNAVAILABLE,
    ErrorCode.INTERRUPTED,
}
PREFETCH = 2  # files parsed ahead of the writer

__all__ = ["FileResult", "IngestEvent", "IngestSummary", "Ingestor", "Outcome", "Reporter"]


def _quiet(_: IngestEvent) -> None:
    pass


class Ingestor:
    """Runs ingestion for one collection with one embedding provider."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        provider: EmbeddingProvider,
        *,
        collection: str = "default",
        chunk_tokens: int = 350,
        chunk_overlap: int = 40,
        reporter: Reporter | None = None,
        ocr: OcrOptions | None = None,
        parse: ParseOptions | None = None,
        refresh: bool = False,
    ) -> None:
        self.pool = pool
        self.refresh = refresh  # re-read unchanged files too (new chunking, new context)
        self.parse = parse or ParseOptions()
        if ocr is None:
            from pgrag.ingest.ocr import OcrOptions

            ocr = OcrOptions()
        self.ocr = ocr
        self.provider = provider
        self.collection_name = collection
        self.chunk_tokens = chunk_tokens
        self.chunk_overlap = chunk_overlap
        self.report = metrics.counting_reporter(reporter or _quiet)
        self._collection: Collection | None = None

    async def collection(self) -> Collection:
        if self._collection is None:
            dims = await self.provider.probe_dimensions()
            async with self.pool.connection() as conn:
                self._collection = await ensure_collection(
                    conn, self.collection_name, self.provider, dims
                )
        return self._collection

    async def run(self, targets: list[Path], *, remove_missing: bool = True) -> IngestSummary:
        """Ingest the targets; first, the vectors earlier runs left missing are queued."""
        summary = IngestSummary(self.collection_name)
        col = await self.collection()
        async with self._vector_stage(col) as stage:
            summary.resumed = await self._resume(col, stage)
            for target in targets:
                root, files = await asyncio.to_thread(walk, target)
                await self._ingest_files(col, root, files, summary, stage)
                if remove_missing and target.expanduser().resolve().is_dir():
                    refused = set(summary.refused())  # e.g. now a link: its old text goes too
                    present = [f.rel for f in files if f.rel not in refused]
                    async with self.pool.connection() as conn:
                        removed = await removals.remove_missing(conn, col.id, str(root), present)
                    for path in removed:
                        summary.results.append(FileResult(path, Outcome.REMOVED))
                        self.report(IngestEvent("file_done", path, result=summary.results[-1]))
        async with self.pool.connection() as conn:  # one row per language again (30_semantic)
            await store.compact_language_sums(conn, col.set_id)
            await bm25_sums.compact(conn, col.id)
        return summary

    async def ingest_files(self, root: Path, files: list[FoundFile]) -> IngestSummary:
        """Ingest given files of a root (watch mode), without removal."""
        summary = IngestSummary(self.collection_name)
        col = await self.collection()
        async with self._vector_stage(col) as stage:
            await self._ingest_files(col, root, files, summary, stage)
        return summary

    async def resume(self) -> IngestSummary:
        """Embed what earlier runs left without vectors (e.g. killed between the phases, or
        the provider was down) and nothing else."""
        summary = IngestSummary(self.collection_name)
        col = await self.collection()
        async with self._vector_stage(col) as stage:
            summary.resumed = await self._resume(col, stage)
        return summary

    def _vector_stage(self, col: Collection) -> AbstractAsyncContextManager[VectorStage]:
        """The embedding task beside the writer."""
        assert col.set_id is not None
        return running_stage(self.pool, self.provider, (col.id, col.set_id), self.report)

    async def _resume(self, col: Collection, stage: VectorStage) -> list[FileResult]:
        assert col.set_id is not None
        resumed: list[FileResult] = []
        async with self.pool.connection() as conn:
            await interrupted.fail_interrupted(conn, col.id)  # their writer died
            for doc in await vector_store.waiting_documents(conn, col.id):
                rows = await vector_store.missing_chunks(conn, col.id, col.set_id, doc.id)
                chunks = await asyncio.to_thread(pending_chunks, rows)  # counts tokens
                resumed.append(FileResult(doc.path, Outcome.UNCHANGED, chunks=len(chunks)))
                stage.add(PendingDocument(doc.id, chunks, resumed[-1]))
        return resumed

    async def remove(self, root: Path, rel_paths: list[str]) -> list[str]:
        """Drop the documents of deleted paths; a deleted (or moved away) folder is one
        path, so everything under it goes too."""
        col = await self.collection()
        async with self.pool.connection() as conn:
            removed = await removals.remove_paths(conn, col.id, str(root), rel_paths)
        metrics.count_ingest("removed", len(removed))
        return removed

    async def _ingest_files(
        self,
        col: Collection,
        root: Path,
        files: list[FoundFile],
        summary: IngestSummary,
        stage: VectorStage,
    ) -> None:
        supported = []
        for f in files:
            if f.path.suffix.lower().lstrip(".") in SUPPORTED_EXTENSIONS:
                supported.append(f)
            else:
                summary.results.append(
                    FileResult(f.rel, Outcome.SKIPPED, error="unsupported file type")
                )
        self.report(IngestEvent("scan", total=len(supported)))
        async with self.pool.connection() as conn:
            known = await store.known_documents(conn, col.id, [f.rel for f in supported])
        async with self._prepared(supported, known, summary) as queue:
            while (item := await queue.get()) is not None:
                work, prepared, error = item
                result = await self._store(col, work, prepared, error, stage)
                summary.results.append(result)
                self.report(IngestEvent("file_done", work.found.rel, result=result))

    @contextlib.asynccontextmanager
    async def _prepared(
        self, files: list[FoundFile], known: dict[str, store.KnownDocument], summary: IngestSummary
    ) -> AsyncIterator[
        asyncio.Queue[tuple[Work, PreparedDocument | None, ParseError | None] | None]
    ]:
        """Hash and parse files ahead of the embedder, at most PREFETCH at a time."""
        queue: asyncio.Queue[tuple[Work, PreparedDocument | None, ParseError | None] | None] = (
            asyncio.Queue(maxsize=PREFETCH)
        )

        parse = functools.partial(
            parse_file, target=self.chunk_tokens, overlap=self.chunk_overlap, options=self.parse
        )

        async def produce() -> None:
            cancelled = False
            try:
                for f in files:
                    if (hashed := await self._hash(f, summary)) is None:
                        continue
                    digest, size, too_large = hashed
                    k = known.get(f.rel)
                    if (
                        not self.refresh
                        and k
                        and k.content_hash == digest
                        and (
                            k.status == "ready"
                            or (k.status == "failed" and k.error_code not in RETRYABLE_CODES)
                        )
                    ):
                        result = FileResult(f.rel, Outcome.UNCHANGED)
                        summary.results.append(result)
                        self.report(IngestEvent("file_done", f.rel, result=result))
                        continue
                    work = Work(f, digest, size, k)
                    self.report(IngestEvent("file_start", f.rel))
                    if too_large is not None:
                        await queue.put((work, None, too_large))
                        continue
                    try:
                        prepared = await parse(f, digest, self._ocr_for(f.rel))
                        await queue.put((work, prepared, None))
                    except ParseError as exc:
                        await queue.put((work, None, exc))
                    except Exception as exc:  # no worker (cannot start one): retried next run
                        log.exception("parsing %r failed", f.rel)
                        error = ParseError(ErrorCode.INTERNAL, f"{type(exc).__name__}: {exc}")
                        await queue.put((work, None, error))
            except asyncio.CancelledError:
                cancelled = True
                raise
            finally:
                # the end mark for the consumer; only `_prepared` cancels us, once the consumer
                # has gone (an error, a cancelled run): then the queue may stay full forever
                if not cancelled:
                    await queue.put(None)

        task = asyncio.create_task(produce())
        try:
            yield queue
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _hash(
        self, f: FoundFile, summary: IngestSummary
    ) -> tuple[str, int, FileTooLarge | None] | None:
        """(content hash, size, None), or for a file over its type's size bound (its size and
        mtime as the hash, size, the failure) without reading it; None, with the file's
        result reported, when it may not or cannot be read."""
        try:
            digest, size = await asyncio.to_thread(
                f.sha256, self.parse.follow_links, file_bound(f.path.suffix)
            )
        except FileTooLarge as exc:  # known from its size: never read
            return exc.stamp, exc.size, exc
        except UnsafeFile as exc:  # a link, a FIFO, a device: never read
            result = FileResult(f.rel, Outcome.SKIPPED, 0, 0, exc.code, exc.message)
            summary.results.append(result)
            self.report(IngestEvent("file_done", f.rel, result=result))
            return None
        except OSError as exc:  # vanished or unreadable since the walk
            summary.results.append(
                FileResult(f.rel, Outcome.FAILED, error_code=ErrorCode.IO_ERROR, error=str(exc))
            )
            return None
        return digest, size, None

    def _ocr_for(self, rel: str) -> OcrOptions:
        """The OCR options with per-page progress reported on the event loop's thread."""
        loop = asyncio.get_running_loop()

        def progress(done: int, total: int) -> None:
            event = IngestEvent("ocr", rel, total=total, done=done)
            loop.call_soon_threadsafe(self.report, event)

        return dataclasses.replace(self.ocr, progress=progress)

    async def _store(
        self,
        col: Collection,
        work: Work,
        prepared: PreparedDocument | None,
        error: ParseError | None,
        stage: VectorStage,
    ) -> FileResult:
        """Phase 1: the version with the vectors the cache knows, in one transaction; the
        chunks still without one go to the vector stage."""
        rel = work.found.rel
        outcome = Outcome.UPDATED if work.known else Outcome.ADDED
        fields = (
            prepared.fields if prepared else base_fields(work.found, work.content_hash, work.size)
        )
        async with self.pool.connection() as conn, interrupted.writing(conn, col.id, rel):
            doc_id = await store.mark_processing(conn, col.id, fields)
            failed = Failure(conn, col.id, doc_id, work)
            if error is not None or prepared is None:
                code = error.code if error else ErrorCode.INTERNAL
                message = error.message if error else "no content"
                return await failed.mark(Outcome.FAILED, code, message, work.content_hash)
            hashes = [c.content_hash for c in prepared.chunks]
            known = await cache.lookup(conn, cache.cache_key(self.provider), list(set(hashes)))
            vectors = [known.get(h) for h in hashes]
            assert col.set_id is not None
            try:
                chunk_ids = await store.write_version(
                    conn,
                    document_id=doc_id,
                    collection_id=col.id,
                    set_id=col.set_id,
                    fields=prepared.fields,
                    units=prepared.units,
                    chunks=prepared.chunks,
                    vectors=vectors,
                )
            except store.EmbeddingSetChanged:
                message = (
                    f"the collection '{col.name}' was reindexed to another embedding model "
                    f"while this file was prepared for {self.provider.model}: nothing was "
                    "written; ingest again with the collection's current model"
                )
                return await failed.mark(Outcome.PENDING, str(ErrorCode.INVALID_ARGUMENT), message)
            except (psycopg.DataError, psycopg.IntegrityError, psycopg.InternalError) as exc:
                # refused inside the version's transaction (e.g. vectors of another size than
                # the set's): rolled back, the previous version stays; the run goes on
                message = f"the database refused this version, the previous one is kept: {exc}"
                return await failed.mark(Outcome.FAILED, str(ErrorCode.DB_ERROR), message)
        if chunk_ids is None:
            return FileResult(
                rel,
                Outcome.FAILED,
                error_code=ErrorCode.NOT_FOUND,
                error="the document was deleted while it was being ingested; ingest the "
                "file again to add it back",
            )
        result = FileResult(rel, outcome, chunks=len(prepared.chunks))
        # string work over every chunk: 45 MB of text held the event loop (and /healthz) 5 s
        texts = await asyncio.to_thread(prepared.embed_texts)
        missing = [
            PendingChunk(chunk_ids[i], texts[i], c.draft.token_count)
            for i, c in enumerate(prepared.chunks)
            if vectors[i] is None
        ]
        if missing:
            stage.add(PendingDocument(doc_id, missing, result))
        return result
