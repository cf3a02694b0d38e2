"""Ingesting one stored document again from its file (the console's "Re-ingest"): the same
Ingestor the CLI and REST uploads run, on the document's root and path, in the background;
its progress is the document's status (pending → processing → ready)."""

from __future__ import annotations

from pathlib import Path

from pgrag.db.scope import scoped_connection
from pgrag.errors import ErrorCode, InvalidArgument, NotFound, PgragError
from pgrag.services.context import AppContext
from pgrag.services.documents import resolve
from pgrag.services.uploads import start_ingestion
from pgrag.store.reingest import queue_reingest


async def reingest(context: AppContext, scope: list[str] | None, ref: str) -> str:
    """Queue a document the caller can see and start its ingestion; its id. The caller has
    checked that writes are allowed (require_remote_writes)."""
    async with scoped_connection(context.pool, scope) as conn:
        doc = await resolve(conn, ref, scope)
    root, path = doc.row.metadata.get("root"), doc.row.path
    if not root:
        raise InvalidArgument(
            f"'{path}' was saved, not ingested from a file: there is no file to read again",
            detail={"document_id": doc.id},
        )
    if not (Path(root) / path).is_file():
        raise NotFound(
            f"the file of '{path}' is no longer in {root}: restore it, or delete the document",
            detail={"document_id": doc.id},
        )
    # unscoped: the scoped role may only read (visibility was checked above)
    async with context.pool.connection() as conn:
        queued = await queue_reingest(conn, doc.id)
    if not queued:
        raise PgragError(
            f"'{path}' is being ingested already: wait until it is ready",
            code=ErrorCode.PROCESSING,
            detail={"document_id": doc.id},
        )
    start_ingestion(context, Path(root), path, doc.row.collection)
    return doc.id
