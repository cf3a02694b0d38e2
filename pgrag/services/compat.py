"""Reads the compatibility toolsets need beyond search, each in its own scoped snapshot.

The `rag` toolset numbers documents with integers derived from their UUIDs (see
pgrag/mcp/toolsets/compat/rag.py); a reference to one may be that integer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from pgrag.db.scope import scoped_connection
from pgrag.errors import NotFound
from pgrag.services import documents as docs
from pgrag.store import catalog, pages
from pgrag.store import compat as store
from pgrag.store.compat import DocumentDetails, ListedDocument

__all__ = ["DocumentDetails", "ListedDocument"]


async def document_details(
    pool: AsyncConnectionPool, scope: list[str] | None, ids: list[str]
) -> dict[str, DocumentDetails]:
    """Metadata of the documents `ids` the caller may see, by id (none asked: none read)."""
    if not ids:
        return {}
    async with scoped_connection(pool, scope) as conn:
        return await store.document_details(conn, ids)


async def uuids_for_int_ids(
    pool: AsyncConnectionPool, scope: list[str] | None, ids: list[int]
) -> list[str]:
    async with scoped_connection(pool, scope) as conn:
        return await store.uuids_for_int_ids(conn, ids, scope)


async def chunk_texts(
    pool: AsyncConnectionPool, scope: list[str] | None, ids: list[int]
) -> dict[int, tuple[int, str]]:
    """chunk id -> (ordinal, text) for the given chunks (none asked: none read)."""
    if not ids:
        return {}
    async with scoped_connection(pool, scope) as conn:
        return await store.chunk_texts(conn, ids)


async def ready_documents(
    pool: AsyncConnectionPool, scope: list[str] | None, offset: int, limit: int
) -> tuple[list[ListedDocument], int]:
    """(one page of the ready documents by path, how many there are in all)."""
    async with scoped_connection(pool, scope) as conn:
        return await store.ready_documents(conn, scope, offset, limit)


@dataclass(frozen=True)
class DocumentRead:
    doc: docs.DocumentRef
    text: str
    chunks: list[dict[str, Any]]  # from the asked offset on
    total_chunks: int


async def read_document(
    pool: AsyncConnectionPool,
    scope: list[str] | None,
    ref: int | str,
    chunk_offset: int,
    chunk_limit: int,
) -> DocumentRead:
    """A ready document's text, its chunks past `chunk_offset` and its chunk count, in one
    snapshot."""
    async with scoped_connection(pool, scope) as conn:
        doc = await _resolve(conn, ref, scope)
        docs.require_ready(doc)
        text = await pages.extracted_text(conn, doc.id)
        rows = await catalog.chunks(conn, doc.id, chunk_offset, chunk_limit)
        total = await store.chunk_count(conn, doc.id)
    return DocumentRead(doc, text, rows, total)


async def _resolve(
    conn: psycopg.AsyncConnection, ref: int | str, scope: list[str] | None
) -> docs.DocumentRef:
    """By the integer id, or by UUID / unique path / file name."""
    text = str(ref).strip()
    if isinstance(ref, int) or text.isdigit():
        found = await store.uuids_for_int_ids(conn, [int(text)], scope)
        if not found:
            raise NotFound(
                f"no document with id {text}: use an id from list_documents or rag_search",
                detail={"document_id": text},
            )
        text = found[0]
    return await docs.resolve(conn, text, scope)
