"""Reading stored documents: folders, listings, outlines, text, pages, sheets, slides.

Everything comes from Postgres (units, sheet_rows, the cached outline): no file is
re-read. `scope` is the list of collections the caller may see (None = all).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from pgrag.db.scope import scoped_connection
from pgrag.errors import ErrorCode, InvalidArgument, NotFound, PgragError
from pgrag.store import documents as store

RESOLVE_SQL = """
SELECT d.id::text AS document_id, d.name, d.path, d.folder, d.file_type, d.status, d.progress,
       d.error_code, d.error_detail, d.title, d.author, d.submitter, d.size_bytes, d.tags,
       d.created_at, d.modified_at, d.ingested_at, d.outline, d.metadata, c.name AS collection
FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
WHERE (%(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[]))
  AND (d.id::text = %(ref)s OR d.path = %(ref)s OR d.name = %(ref)s)
ORDER BY (d.id::text = %(ref)s) DESC, (d.path = %(ref)s) DESC, d.path
LIMIT 20
"""

FOLDERS_SQL = """
SELECT d.folder, count(*) AS documents
FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
WHERE %(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[])
GROUP BY d.folder ORDER BY d.folder
"""

LIST_SQL = """
SELECT d.id::text AS document_id, d.name, d.path, d.folder, d.file_type, d.status,
       d.size_bytes, d.modified_at, d.title, c.name AS collection
FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
WHERE (%(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[]))
  AND (%(folder)s::text IS NULL OR d.folder = %(folder)s
       OR d.folder LIKE replace(replace(replace(%(folder)s, '\\', '\\\\'), '%%', '\\%%'), '_', '\\_') || '/%%')
  AND (%(file_type)s::text IS NULL OR d.file_type = %(file_type)s)
  AND (%(status)s::text IS NULL OR d.status = %(status)s)
ORDER BY d.path
OFFSET %(offset)s LIMIT %(limit)s
"""

UNITS_SQL = """
SELECT id, kind, number, title, body, meta FROM pgrag.units
WHERE document_id = %(doc)s::uuid AND (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(numbers)s::int[] IS NULL OR number = ANY(%(numbers)s::int[]))
ORDER BY kind, number
"""

UNIT_COUNT_SQL = "SELECT kind, count(*) FROM pgrag.units WHERE document_id = %s::uuid GROUP BY kind"

CHUNKS_SQL = """
SELECT id AS chunk_id, ordinal, content, token_count, page, section, sheet, row_start, row_end,
       slide, char_start, char_end
FROM pgrag.chunks WHERE document_id = %(doc)s::uuid AND ordinal > %(after)s
ORDER BY ordinal LIMIT %(limit)s
"""

SHEET_ROWS_SQL = """
SELECT row_number, cells FROM pgrag.sheet_rows
WHERE unit_id = %(unit)s AND row_number BETWEEN %(lo)s AND %(hi)s
ORDER BY row_number
"""


@dataclass(frozen=True)
class DocumentRef:
    row: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.row["document_id"])

    @property
    def file_type(self) -> str:
        return str(self.row["file_type"])


async def resolve(conn: psycopg.AsyncConnection, ref: str, scope: list[str] | None) -> DocumentRef:
    """By document_id, or by a path or file name that is unique (ambiguous → candidates)."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(RESOLVE_SQL, {"ref": ref.strip(), "scope": scope})
        rows = await cur.fetchall()
    if not rows:
        raise NotFound(
            f"no document '{ref}': use a document_id from search or list_documents, "
            "or a unique path or file name",
            detail={"document_id": ref},
        )
    exact = [r for r in rows if r["document_id"] == ref or r["path"] == ref]
    if len(exact) == 1 or (not exact and len(rows) == 1):
        return DocumentRef((exact or rows)[0])
    candidates = [
        {"document_id": r["document_id"], "path": r["path"], "collection": r["collection"]}
        for r in rows
    ]
    raise InvalidArgument(
        f"'{ref}' matches {len(rows)} documents: pass one of their document_ids",
        detail={"candidates": candidates},
    )


def require_ready(doc: DocumentRef) -> None:
    status = doc.row["status"]
    if status == "failed":
        raise PgragError(
            f"document '{doc.row['path']}' failed to ingest ({doc.row['error_code']}: "
            f"{doc.row['error_detail']}); fix the file and ingest it again",
            code=ErrorCode.CONTENT_UNAVAILABLE,
            detail={"document_id": doc.id},
        )
    if status != "ready":
        raise PgragError(
            f"document '{doc.row['path']}' is {status} ({doc.row['progress']:.0f}%); "
            "call get_status and retry when it is ready",
            code=ErrorCode.PROCESSING,
            detail={"document_id": doc.id, "progress": doc.row["progress"]},
        )


async def list_folders(
    conn: psycopg.AsyncConnection, scope: list[str] | None
) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(FOLDERS_SQL, {"scope": scope})
        rows = await cur.fetchall()
    return [{"folder": r["folder"] or "/", "documents": r["documents"]} for r in rows]


async def list_documents(
    conn: psycopg.AsyncConnection,
    scope: list[str] | None,
    *,
    folder: str | None,
    file_type: str | None,
    status: str | None,
    offset: int,
    limit: int,
) -> list[dict[str, Any]]:
    folder = folder.strip("/") if folder and folder.strip("/") else None
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            LIST_SQL,
            {
                "scope": scope,
                "folder": folder,
                "status": status,
                "file_type": file_type.lower().lstrip(".") if file_type else None,
                "offset": offset,
                "limit": limit,
            },
        )
        return await cur.fetchall()


async def units(
    conn: psycopg.AsyncConnection,
    doc_id: str,
    kind: str | None = None,
    numbers: list[int] | None = None,
) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(UNITS_SQL, {"doc": doc_id, "kind": kind, "numbers": numbers})
        return await cur.fetchall()


async def extracted_text(conn: psycopg.AsyncConnection, doc_id: str) -> str:
    """The whole extracted text: unit bodies in order (what resources and REST return)."""
    return "\n\n".join(u["body"] for u in await units(conn, doc_id) if u["body"])


async def unit_counts(conn: psycopg.AsyncConnection, doc_id: str) -> dict[str, int]:
    return dict(await (await conn.execute(UNIT_COUNT_SQL, (doc_id,))).fetchall())


async def chunks(
    conn: psycopg.AsyncConnection, doc_id: str, after: int, limit: int
) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(CHUNKS_SQL, {"doc": doc_id, "after": after, "limit": limit})
        return await cur.fetchall()


async def sheet_rows(
    conn: psycopg.AsyncConnection, unit_id: int, lo: int, hi: int
) -> list[tuple[int, list[str]]]:
    rows = await (
        await conn.execute(SHEET_ROWS_SQL, {"unit": unit_id, "lo": lo, "hi": hi})
    ).fetchall()
    return [(r[0], list(r[1])) for r in rows]


def metadata(doc: DocumentRef) -> dict[str, Any]:
    r = doc.row
    outline = r["outline"] or {}
    meta = {
        "document_id": doc.id,
        "name": r["name"],
        "path": r["path"],
        "collection": r["collection"],
        "type": r["file_type"],
        "title": r["title"],
        "author": r["author"],
        "submitter": r["submitter"],
        "tags": r["tags"],
        "size_bytes": r["size_bytes"],
        "file_size": outline.get("file_size"),
        "created": r["created_at"],
        "modified": r["modified_at"],
        "ingested": r["ingested_at"],
        "status": r["status"],
    }
    for key in ("total_pages", "pages_estimated", "total_slides", "total_rows"):
        if key in outline:
            meta[key] = outline[key]
    if "sheets" in outline:
        meta["sheets"] = [s.get("name") for s in outline["sheets"]]
    return meta


async def delete_document(pool: AsyncConnectionPool, scope: list[str] | None, ref: str) -> None:
    """Delete a document the caller can see, and everything derived from it. Visibility is
    checked under the caller's scope; the delete itself runs unscoped (the scoped role
    may only read)."""
    async with scoped_connection(pool, scope) as conn:
        doc = await resolve(conn, ref, scope)
    async with pool.connection() as conn:
        await store.delete_document(conn, doc.id)
