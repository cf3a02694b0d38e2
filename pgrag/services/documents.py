"""Stored documents as the transports see them: resolving a reference (ambiguous names
answer with candidates), readiness, folders, listings, metadata, text, chunks; and
deletion. The SQL is in store/catalog.py, store/pages.py and store/documents.py.
`scope` is the list of collections the caller may see (None = all). Each function a
transport calls opens its own connection under the caller's scope.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from pgrag.db.scope import scoped_connection
from pgrag.errors import ErrorCode, InvalidArgument, NotFound, PgragError
from pgrag.store import catalog, pages, removals
from pgrag.store.catalog import DocumentSort as DocumentSort  # the console sorts by it
from pgrag.store.rows import DocumentRow


@dataclass(frozen=True)
class DocumentRef:
    row: DocumentRow

    @property
    def id(self) -> str:
        return self.row.document_id

    @property
    def file_type(self) -> str:
        return self.row.file_type


async def resolve(conn: psycopg.AsyncConnection, ref: str, scope: list[str] | None) -> DocumentRef:
    """By document_id, or by a path or file name that is unique (ambiguous → candidates);
    on a connection a service already holds (transports call `find`)."""
    rows = await catalog.resolve_candidates(conn, ref.strip(), scope)
    if not rows:
        raise NotFound(
            f"no document '{ref}': use a document_id from search or list_documents, "
            "or a unique path or file name",
            detail={"document_id": ref},
        )
    exact = [r for r in rows if ref in (r.document_id, r.path)]
    if len(exact) == 1 or (not exact and len(rows) == 1):
        return DocumentRef((exact or rows)[0])
    candidates = [
        {"document_id": r.document_id, "path": r.path, "collection": r.collection} for r in rows
    ]
    raise InvalidArgument(
        f"'{ref}' matches {len(rows)} documents: pass one of their document_ids",
        detail={"candidates": candidates},
    )


def require_ready(doc: DocumentRef) -> None:
    r = doc.row
    if r.status == "failed":
        raise PgragError(
            f"document '{r.path}' failed to ingest ({r.error_code}: "
            f"{r.error_detail}); fix the file and ingest it again",
            code=ErrorCode.CONTENT_UNAVAILABLE,
            detail={"document_id": doc.id},
        )
    if r.status != "ready":
        raise PgragError(
            f"document '{r.path}' is {r.status} ({r.progress:.0f}%); "
            "call get_status and retry when it is ready",
            code=ErrorCode.PROCESSING,
            detail={"document_id": doc.id, "progress": r.progress},
        )


async def _documents(
    conn: psycopg.AsyncConnection,
    collections: list[str] | None,
    *,
    folder: str | None,
    file_type: str | None,
    status: str | None,
    offset: int,
    limit: int,
    sort: DocumentSort = DocumentSort.PATH,
    ocr: bool | None = None,
    language: str | None = None,
) -> list[dict[str, Any]]:
    folder = folder.strip("/") if folder and folder.strip("/") else None
    return await catalog.documents(
        conn,
        collections,
        folder=folder,
        file_type=file_type.lower().lstrip(".") if file_type else None,
        status=status,
        offset=offset,
        limit=limit,
        sort=sort,
        ocr=ocr,
        language=language.strip().lower() if language else None,
    )


async def _folders(
    conn: psycopg.AsyncConnection, collections: list[str] | None
) -> list[dict[str, Any]]:
    rows = await catalog.folders(conn, collections)
    return [{"folder": r["folder"] or "/", "documents": r["documents"]} for r in rows]


def metadata(doc: DocumentRef) -> dict[str, Any]:
    r = doc.row
    outline = r.outline or {}
    meta = {
        "document_id": doc.id,
        "name": r.name,
        "path": r.path,
        "collection": r.collection,
        "type": r.file_type,
        "title": r.title,
        "author": r.author,
        "submitter": r.submitter,
        "tags": r.tags,
        "size_bytes": r.size_bytes,
        "file_size": outline.get("file_size"),
        "created": r.created_at,
        "modified": r.modified_at,
        "ingested": r.ingested_at,
        "status": r.status,
    }
    for key in ("total_pages", "pages_estimated", "total_slides", "total_rows"):
        if key in outline:
            meta[key] = outline[key]
    if "sheets" in outline:
        meta["sheets"] = [s.get("name") for s in outline["sheets"]]
    if ocr := (r.metadata or {}).get("ocr"):  # engine, pages, confidence, failed pages
        meta["ocr"] = ocr
    return meta


async def find(
    pool: AsyncConnectionPool, scope: list[str] | None, ref: str, *, ready: bool = False
) -> DocumentRef:
    """The document `ref` names, as `resolve`, on a connection of its own under `scope`;
    `ready`: refused unless fully ingested."""
    async with scoped_connection(pool, scope) as conn:
        doc = await resolve(conn, ref, scope)
    if ready:
        require_ready(doc)
    return doc


async def page_after(
    pool: AsyncConnectionPool, scope: list[str] | None, after: tuple[str, str], limit: int
) -> list[DocumentRef]:
    """Up to `limit` documents past the (path, id) `after`: keyset paging on a total order."""
    async with scoped_connection(pool, scope) as conn:
        return [DocumentRef(r) for r in await catalog.documents_after(conn, scope, after, limit)]


async def folders_of(pool: AsyncConnectionPool, scope: list[str] | None) -> list[dict[str, Any]]:
    async with scoped_connection(pool, scope) as conn:
        return await _folders(conn, scope)


async def listing(
    pool: AsyncConnectionPool, scope: list[str] | None, **filters: Any
) -> list[dict[str, Any]]:
    """Documents by folder, type, status, OCR and language (keyword filters; `offset`,
    `limit`, `sort`), on a connection of its own under `scope`."""
    async with scoped_connection(pool, scope) as conn:
        return await _documents(conn, scope, **filters)


@dataclass(frozen=True)
class Browse:
    """A page of the console's document listing: the rows, each one's language, and the
    folders of the collections listed, read in one snapshot."""

    rows: list[dict[str, Any]]
    languages: dict[str, str]  # document_id -> a language code, or "mixed"
    folders: list[dict[str, Any]]


async def browse(
    pool: AsyncConnectionPool,
    scope: list[str] | None,
    collections: list[str] | None,
    **filters: Any,
) -> Browse:
    """`listing` narrowed to `collections` (the caller's `scope` still applies through
    row-level security: a collection outside it lists nothing)."""
    async with scoped_connection(pool, scope) as conn:
        rows = await _documents(conn, collections, **filters)
        ids = [r["document_id"] for r in rows]
        languages = await catalog.document_languages(conn, ids)
        return Browse(rows, languages, await _folders(conn, collections))


async def ready_text(
    pool: AsyncConnectionPool, scope: list[str] | None, ref: str
) -> tuple[DocumentRef, str]:
    """A fully ingested document and its whole extracted text, read in one snapshot."""
    async with scoped_connection(pool, scope) as conn:
        doc = await resolve(conn, ref, scope)
        require_ready(doc)
        return doc, await pages.extracted_text(conn, doc.id)


async def ready_chunks(
    pool: AsyncConnectionPool, scope: list[str] | None, ref: str, after: int, limit: int
) -> tuple[DocumentRef, list[dict[str, Any]]]:
    """A fully ingested document and its chunks past ordinal `after`, in one snapshot."""
    async with scoped_connection(pool, scope) as conn:
        doc = await resolve(conn, ref, scope)
        require_ready(doc)
        return doc, await catalog.chunks(conn, doc.id, after, limit)


async def delete_document(pool: AsyncConnectionPool, scope: list[str] | None, ref: str) -> None:
    """Delete a document the caller can see, and everything derived from it. Visibility is
    checked under the caller's scope; the delete itself runs unscoped (the scoped role
    may only read)."""
    async with scoped_connection(pool, scope) as conn:
        doc = await resolve(conn, ref, scope)
    async with pool.connection() as conn:
        await removals.delete_document(conn, doc.id)
