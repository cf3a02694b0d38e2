"""One document as the console's page shows it: metadata, outline, status and failure,
the text by unit and the chunks, read in one snapshot under the caller's scope."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg_pool import AsyncConnectionPool

from pgrag.db.scope import scoped_connection
from pgrag.services import documents as docs
from pgrag.services.originals import file_modified
from pgrag.services.previews import has_pages
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
    original: bool  # its file is still in its folder: it can be downloaded
    previews: bool  # ... and its pages shown as pictures (PDFs, images)
    file_gone: bool  # ingested from a file no longer in its folder


async def document_view(
    pool: AsyncConnectionPool, ref: str, scope: list[str] | None, *, follow_links: bool
) -> DocumentView:
    """NOT_FOUND for a document the caller cannot see, exactly as REST answers."""
    async with scoped_connection(pool, scope) as conn:
        doc = await docs.resolve(conn, ref, scope)
        units = await pages.units(conn, doc.id)
        chunks = await catalog.chunks(conn, doc.id, 0, MAX_CHUNKS)
    on_disk = file_modified(doc, follow_links=follow_links)
    meta = _dates(docs.metadata(doc), doc.row.outline or {}, on_disk)
    return DocumentView(
        doc, meta, doc.row.outline or {}, units, chunks, on_disk is not None,
        on_disk is not None and has_pages(doc.row.file_type),
        on_disk is None and bool((doc.row.metadata or {}).get("root")),
    )  # fmt: skip


def _dates(
    meta: dict[str, Any], outline: dict[str, Any], on_disk: datetime | None
) -> dict[str, Any]:
    """`modified` is the file's own date (on disk now, else as it was at ingestion); a date
    the file states inside it (a .docx's core properties) is shown apart, labelled so."""
    stated: datetime | None = meta.pop("modified")
    at_ingest = outline.get("file_modified")
    own = on_disk or (datetime.fromisoformat(at_ingest) if at_ingest else None)
    meta["modified"] = own or stated
    # ingested before the file's own date was kept: a stated date is one apart from it
    no_inner_date = at_ingest is not None and at_ingest == outline.get("modified")
    if own and stated and not no_inner_date and abs((stated - own).total_seconds()) >= 1:
        meta["modified_inside_file"] = stated
    return meta
