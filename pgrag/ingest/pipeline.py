"""An ingestion run: walk, skip unchanged files, parse ahead in a thread, embed (cached),
write each document in one transaction, remove documents whose files disappeared.

One bad file never stops the run: it ends `failed` with its reason. When the embedding
provider is down the document stays `pending` with the reason, to be retried next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

import numpy as np
import psycopg
from psycopg_pool import AsyncConnectionPool

from pgrag import metrics
from pgrag.embeddings.base import EmbeddingProvider
from pgrag.embeddings.cache import embed_passages_cached
from pgrag.errors import ErrorCode, PgragError, UpstreamError
from pgrag.ingest.files import SKIP_CODES, UnsafeFile
from pgrag.ingest.parse_worker import ParseOptions, parse_file
from pgrag.ingest.parsers import SUPPORTED_EXTENSIONS
from pgrag.ingest.parsers.base import ParseError
from pgrag.ingest.prepare import PreparedDocument, base_fields
from pgrag.ingest.walker import FoundFile, walk
from pgrag.store import documents as store
from pgrag.store import removals
from pgrag.store.collections import Collection, ensure_collection

if TYPE_CHECKING:
    from pgrag.ingest.ocr import OcrOptions

log = logging.getLogger(__name__)

# OCR_UNAVAILABLE: retried, so installing an engine and ingesting again reads the file
RETRYABLE_CODES = {"UPSTREAM_ERROR", "INTERNAL", "DB_ERROR", "OCR_UNAVAILABLE"}
PREFETCH = 2  # files parsed ahead of the embedder


class Outcome(StrEnum):
    ADDED = "added"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    REMOVED = "removed"
    FAILED = "failed"
    PENDING = "pending"
    SKIPPED = "skipped"


@dataclass
class FileResult:
    path: str
    outcome: Outcome
    chunks: int = 0
    embedded: int = 0  # chunks the model had to embed (the rest came from the cache)
    error_code: str | None = None
    error: str | None = None


@dataclass
class IngestSummary:
    collection: str
    results: list[FileResult] = field(default_factory=list)

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.results if r.outcome == outcome)

    @property
    def failures(self) -> list[FileResult]:
        return [r for r in self.results if r.outcome in (Outcome.FAILED, Outcome.PENDING)]

    def refused(self) -> list[str]:
        """Paths skipped as links or special files (files.SKIP_CODES)."""
        return [r.path for r in self.results if r.error_code in SKIP_CODES]

    @property
    def changed(self) -> bool:
        return any(
            r.outcome in (Outcome.ADDED, Outcome.UPDATED, Outcome.REMOVED) for r in self.results
        )


@dataclass(frozen=True)
class IngestEvent:
    kind: str  # "scan" | "file_start" | "ocr" (pages) | "embed" (chunks) | "file_done"
    path: str = ""
    total: int = 0
    done: int = 0
    result: FileResult | None = None


Reporter = Callable[[IngestEvent], None]


def _quiet(_: IngestEvent) -> None:
    pass


@dataclass
class _Work:
    found: FoundFile
    content_hash: str
    size: int
    known: store.KnownDocument | None


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
    ) -> None:
        self.pool = pool
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
            dims = (
                self.provider.dimensions
                if not hasattr(self.provider, "probe_dimensions")
                else await self.provider.probe_dimensions()
            )
            async with self.pool.connection() as conn:
                self._collection = await ensure_collection(
                    conn, self.collection_name, self.provider, dims
                )
        return self._collection

    async def run(self, targets: list[Path], *, remove_missing: bool = True) -> IngestSummary:
        summary = IngestSummary(self.collection_name)
        col = await self.collection()
        for target in targets:
            root, files = await asyncio.to_thread(walk, target)
            await self._ingest_files(col, root, files, summary)
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
        return summary

    async def ingest_files(self, root: Path, files: list[FoundFile]) -> IngestSummary:
        """Ingest given files of a root (watch mode), without removal."""
        summary = IngestSummary(self.collection_name)
        await self._ingest_files(await self.collection(), root, files, summary)
        return summary

    async def remove(self, root: Path, rel_paths: list[str]) -> list[str]:
        """Drop the documents of deleted paths; a deleted (or moved away) folder is one
        path, so everything under it goes too."""
        col = await self.collection()
        async with self.pool.connection() as conn:
            removed = await removals.remove_paths(conn, col.id, str(root), rel_paths)
        metrics.count_ingest("removed", len(removed))
        return removed

    async def _ingest_files(
        self, col: Collection, root: Path, files: list[FoundFile], summary: IngestSummary
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
                result = await self._store(col, work, prepared, error)
                summary.results.append(result)
                self.report(IngestEvent("file_done", work.found.rel, result=result))

    @contextlib.asynccontextmanager
    async def _prepared(
        self, files: list[FoundFile], known: dict[str, store.KnownDocument], summary: IngestSummary
    ) -> AsyncIterator[
        asyncio.Queue[tuple[_Work, PreparedDocument | None, ParseError | None] | None]
    ]:
        """Hash and parse files ahead of the embedder, at most PREFETCH at a time."""
        queue: asyncio.Queue[tuple[_Work, PreparedDocument | None, ParseError | None] | None] = (
            asyncio.Queue(maxsize=PREFETCH)
        )

        parse = functools.partial(
            parse_file, target=self.chunk_tokens, overlap=self.chunk_overlap, options=self.parse
        )

        async def produce() -> None:
            cancelled = False
            try:
                for f in files:
                    try:
                        digest, size = await asyncio.to_thread(f.sha256, self.parse.follow_links)
                    except UnsafeFile as exc:  # a link, a FIFO, a device: never read
                        result = FileResult(f.rel, Outcome.SKIPPED, 0, 0, exc.code, exc.message)
                        summary.results.append(result)
                        self.report(IngestEvent("file_done", f.rel, result=result))
                        continue
                    except OSError as exc:  # vanished or unreadable since the walk
                        summary.results.append(
                            FileResult(f.rel, Outcome.FAILED, error_code="IO_ERROR", error=str(exc))
                        )
                        continue
                    k = known.get(f.rel)
                    if (
                        k
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
                    work = _Work(f, digest, size, k)
                    self.report(IngestEvent("file_start", f.rel))
                    try:
                        prepared = await parse(f, digest, self._ocr_for(f.rel))
                        await queue.put((work, prepared, None))
                    except ParseError as exc:
                        await queue.put((work, None, exc))
                    except Exception as exc:  # no worker (cannot start one): retried next run
                        log.exception("parsing %r failed", f.rel)
                        error = ParseError("INTERNAL", f"{type(exc).__name__}: {exc}")
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
        work: _Work,
        prepared: PreparedDocument | None,
        error: ParseError | None,
    ) -> FileResult:
        rel = work.found.rel
        outcome = Outcome.UPDATED if work.known else Outcome.ADDED
        fields = (
            prepared.fields if prepared else base_fields(work.found, work.content_hash, work.size)
        )
        async with self.pool.connection() as conn:
            doc_id = await store.mark_processing(conn, col.id, fields)
            failed = _Failure(conn, col.id, doc_id, work)
            if error is not None or prepared is None:
                code = error.code if error else "INTERNAL"
                message = error.message if error else "no content"
                return await failed.mark(Outcome.FAILED, code, message, work.content_hash)
            try:
                vectors, embedded = await self._embed(conn, col.id, doc_id, prepared)
            except PgragError as exc:
                status = Outcome.PENDING if isinstance(exc, UpstreamError) else Outcome.FAILED
                return await failed.mark(status, str(exc.code), exc.message)
            assert col.set_id is not None
            try:
                written = await store.write_version(
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
                    f"while this file was embedded with {self.provider.model}: nothing was "
                    "written; ingest again with the collection's current model"
                )
                return await failed.mark(Outcome.PENDING, str(ErrorCode.INVALID_ARGUMENT), message)
            except (psycopg.DataError, psycopg.IntegrityError, psycopg.InternalError) as exc:
                # refused inside the version's transaction (e.g. vectors of another size than
                # the set's): rolled back, the previous version stays; the run goes on
                message = f"the database refused this version, the previous one is kept: {exc}"
                return await failed.mark(Outcome.FAILED, str(ErrorCode.DB_ERROR), message)
        if not written:
            return FileResult(
                rel,
                Outcome.FAILED,
                error_code="NOT_FOUND",
                error="the document was deleted while it was being ingested; ingest the "
                "file again to add it back",
            )
        return FileResult(rel, outcome, chunks=len(prepared.chunks), embedded=embedded)

    async def _embed(
        self,
        conn: psycopg.AsyncConnection,
        collection_id: int,
        doc_id: UUID,
        prepared: PreparedDocument,
    ) -> tuple[np.ndarray, int]:
        texts = prepared.embed_texts()
        batch = max(self.provider.batch_size * 2, 32)
        parts: list[np.ndarray] = []
        embedded = 0
        for start in range(0, len(texts), batch):
            vecs, n = await embed_passages_cached(conn, self.provider, texts[start : start + batch])
            parts.append(vecs)
            embedded += n
            done = min(len(texts), start + batch)
            if len(texts) > batch:
                await store.set_progress(conn, collection_id, doc_id, 100.0 * done / len(texts))
            self.report(IngestEvent("embed", prepared.found.rel, total=len(texts), done=done))
        if not parts:
            return np.zeros((0, self.provider.dimensions), dtype=np.float32), 0
        return np.vstack(parts), embedded


@dataclass(frozen=True)
class _Failure:
    """A version that could not be written: the document is marked with why (`failed`, or
    `pending` when a retry may succeed) and the run reports the same."""

    conn: psycopg.AsyncConnection
    collection_id: int
    document_id: UUID
    work: _Work

    async def mark(
        self, status: Outcome, code: str, message: str, content_hash: str | None = None
    ) -> FileResult:
        await store.mark_failed(
            self.conn,
            self.collection_id,
            self.document_id,
            status=str(status),
            code=code,
            detail=message,
            content_hash=content_hash,
            size=self.work.size,
        )
        return FileResult(self.work.found.rel, status, error_code=code, error=message)
