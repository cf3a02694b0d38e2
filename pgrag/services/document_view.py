"""One document as the console's page shows it: metadata, outline, status and failure,
the text by unit and the chunks, read in one snapshot under the caller's scope."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg_pool import AsyncConnectionPool

from pgrag.db.scope import scoped_connection
from pgrag.services import documents as docs
from pgrag.store import catalog, pages
from pgrag.store.rows import UnitRow

MAX_CHUNKS = 500  # a page lists at most this many chunks (the rest: get_document_data)


@dataclass(frozen=True)
class DocumentView:
    ref: docs.DocumentRef
    metadata: dict[str, Any]
    outline: dict[str, Any]
    units: list[UnitRow]
    chunks: list[dict[str, Any]]


async def document_view(
    pool: AsyncConnectionPool, ref: str, scope: list[str] | None
) -> DocumentView:
    """NOT_FOUND for a document the caller cannot see, exactly as REST answers."""
    async with scoped_connection(pool, scope) as conn:
        doc = await docs.resolve(conn, ref, scope)
        units = await pages.units(conn, doc.id)
        chunks = await catalog.chunks(conn, doc.id, 0, MAX_CHUNKS)
    return DocumentView(doc, docs.metadata(doc), doc.row.outline or {}, units, chunks)
