"""A file on its way through an ingestion run (pipeline.py): what was found and hashed, how a
version that could not be written is marked, and the chunks a document still needs vectors
for."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

import psycopg

from pgrag.ingest.context import embed_text
from pgrag.ingest.results import FileResult, Outcome
from pgrag.ingest.vector_stage import PendingChunk
from pgrag.ingest.walker import FoundFile
from pgrag.store import documents as store
from pgrag.store import vectors as vector_store


@dataclass
class Work:
    found: FoundFile
    content_hash: str  # or files.FileTooLarge's stamp: a file never read
    size: int
    known: store.KnownDocument | None


def pending_chunks(rows: list[vector_store.MissingChunk]) -> list[PendingChunk]:
    """The chunks of a document to embed: token counting, so the caller runs it in a thread."""
    return [
        PendingChunk(r.id, embed_text(r.heading, r.context, r.content), r.token_count) for r in rows
    ]


@dataclass(frozen=True)
class Failure:
    """A version that could not be written: the document is marked with why (`failed`, or
    `pending` when a retry may succeed) and the run reports the same."""

    conn: psycopg.AsyncConnection
    collection_id: int
    document_id: UUID
    work: Work

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
