"""Reading the catalogue of stored documents: resolving a reference, folders, listings and
chunks (units and sheet rows are read by store/pages.py). Everything comes from Postgres: no
file is re-read. `scope` is the collections the caller may see (None = all); row-level
security enforces it again on scoped connections."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row, dict_row

from pgrag.store.rows import DocumentRow

# the columns of a DocumentRow
DOCUMENT_COLUMNS = """
SELECT d.id::text AS document_id, d.name, d.path, d.folder, d.file_type, d.status, d.progress,
       d.vectors_pending,
       d.error_code, d.error_detail, d.title, d.author, d.submitter, d.size_bytes, d.tags,
       d.created_at, d.modified_at, d.ingested_at, d.outline, d.metadata, c.name AS collection,
       d.metadata -> 'ocr' AS ocr
FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
"""
RESOLVE_SQL = (
    DOCUMENT_COLUMNS
    + """WHERE (%(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[]))
  AND (d.id::text = %(ref)s OR d.path = %(ref)s OR d.name = %(ref)s)
ORDER BY (d.id::text = %(ref)s) DESC, (d.path = %(ref)s) DESC, d.path
LIMIT 20
"""
)
# Keyset paging on (path, id): a total order. Paths repeat across collections, and a cursor
# that kept only the last path skipped the other collections' documents with that path.
RESOURCES_SQL = (
    DOCUMENT_COLUMNS
    + """WHERE (%(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[]))
  AND (d.path, d.id) > (%(after)s, %(after_id)s::uuid)
ORDER BY d.path, d.id LIMIT %(limit)s
"""
)

FOLDERS_SQL = """
SELECT d.folder, count(*) AS documents
FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
WHERE %(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[])
GROUP BY d.folder ORDER BY d.folder
"""

LIST_SQL = """
SELECT d.id::text AS document_id, d.name, d.path, d.folder, d.file_type, d.status,
       d.size_bytes, d.modified_at, d.title, c.name AS collection,
       jsonb_array_length(d.metadata -> 'ocr' -> 'pages') AS ocr_pages
FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
WHERE (%(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[]))
  AND (%(folder)s::text IS NULL OR d.folder = %(folder)s
       OR d.folder LIKE replace(replace(replace(%(folder)s, '\\', '\\\\'), '%%', '\\%%'), '_', '\\_') || '/%%')
  AND (%(file_type)s::text IS NULL OR d.file_type = %(file_type)s)
  AND (%(status)s::text IS NULL OR d.status = %(status)s)
  AND (%(ocr)s::boolean IS NULL OR (d.metadata ? 'ocr') = %(ocr)s)
  AND (%(language)s::text IS NULL OR d.id IN (
       SELECT l.document_id FROM pgrag.document_languages() l WHERE l.language = %(language)s))
ORDER BY {order}
OFFSET %(offset)s LIMIT %(limit)s
"""

# each listed document's language (sql/functions/58_document_languages.sql)
LANGUAGES_SQL = "SELECT document_id::text, language FROM pgrag.document_languages(%s::uuid[])"


class DocumentSort(StrEnum):
    PATH = "path"
    NAME = "name"
    SIZE = "size"  # largest first
    MODIFIED = "modified"  # newest first


# fixed clauses, chosen by the enum: never text from the caller
ORDER_BY = {
    DocumentSort.PATH: "d.path",
    DocumentSort.NAME: "d.name, d.path",
    DocumentSort.SIZE: "d.size_bytes DESC NULLS LAST, d.path",
    DocumentSort.MODIFIED: "d.modified_at DESC NULLS LAST, d.path",
}


# ocr_confidence: of the page the chunk was cut from, when OCR read it (the engines report a
# confidence per page: image.page_meta); disabled_at: taken out of search by hand (0032)
CHUNKS_SQL = """
SELECT c.id AS chunk_id, c.ordinal, c.content, c.token_count, c.page, c.section, c.sheet,
       c.row_start, c.row_end, c.slide, c.char_start, c.char_end, c.heading, c.lang,
       (u.meta ->> 'ocr_confidence')::float8 AS ocr_confidence, c.disabled_at
FROM pgrag.chunks c
LEFT JOIN pgrag.units u ON u.id = c.unit_id AND u.collection_id = c.collection_id
WHERE c.document_id = %(doc)s::uuid AND c.ordinal > %(after)s
ORDER BY c.ordinal LIMIT %(limit)s
"""


async def resolve_candidates(
    conn: psycopg.AsyncConnection, ref: str, scope: list[str] | None
) -> list[DocumentRow]:
    """Up to 20 documents `ref` may name (id, path or file name): exact id first, then
    exact path, then by path."""
    async with conn.cursor(row_factory=class_row(DocumentRow)) as cur:
        await cur.execute(RESOLVE_SQL, {"ref": ref, "scope": scope})
        return await cur.fetchall()


async def documents_after(
    conn: psycopg.AsyncConnection,
    scope: list[str] | None,
    after: tuple[str, str],
    limit: int,
) -> list[DocumentRow]:
    """Up to `limit` documents after the (path, id) `after`, in (path, id) order."""
    args = {"scope": scope, "after": after[0], "after_id": after[1], "limit": limit}
    async with conn.cursor(row_factory=class_row(DocumentRow)) as cur:
        await cur.execute(RESOURCES_SQL, args)
        return await cur.fetchall()


async def folders(conn: psycopg.AsyncConnection, scope: list[str] | None) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(FOLDERS_SQL, {"scope": scope})
        return await cur.fetchall()


async def documents(
    conn: psycopg.AsyncConnection,
    scope: list[str] | None,
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
    """Documents by path (or `sort`); `folder` matches the folder and everything under it;
    `ocr`: only documents read (True) or not read (False) by OCR; `language`: only those
    of this language (pgrag.document_languages: a code, or 'mixed')."""
    query = sql.SQL(LIST_SQL).format(order=sql.SQL(ORDER_BY[sort]))
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(
            query,
            {
                "scope": scope,
                "folder": folder,
                "status": status,
                "file_type": file_type,
                "ocr": ocr,
                "language": language,
                "offset": offset,
                "limit": limit,
            },
        )
        return await cur.fetchall()


async def document_languages(conn: psycopg.AsyncConnection, doc_ids: list[str]) -> dict[str, str]:
    """The language of each of these documents that has one."""
    rows = await (await conn.execute(LANGUAGES_SQL, (doc_ids,))).fetchall()
    return {r[0]: r[1] for r in rows}


async def chunks(
    conn: psycopg.AsyncConnection, doc_id: str, after: int, limit: int
) -> list[dict[str, Any]]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(CHUNKS_SQL, {"doc": doc_id, "after": after, "limit": limit})
        return await cur.fetchall()


EVAL_RESOLVE_SQL = """
SELECT d.id::text, d.path FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
WHERE (d.id::text = %(doc)s OR d.path = %(doc)s OR d.name = %(doc)s)
  AND (%(collection)s::text IS NULL OR c.name = %(collection)s)
"""
TEXT_SAMPLE_SQL = """
SELECT string_agg(left(u.body, 4000), E'\\n' ORDER BY u.number)
FROM (SELECT body, number FROM pgrag.units WHERE document_id = ANY(%(ids)s::uuid[])
      ORDER BY number LIMIT 20) u
"""


async def documents_named(
    conn: psycopg.AsyncConnection, ref: str, collection: str | None
) -> list[tuple[str, str]]:
    """(id, path) of the documents whose id, path or file name is `ref`, in `collection`."""
    cur = await conn.execute(EVAL_RESOLVE_SQL, {"doc": ref, "collection": collection})
    return [(str(r[0]), str(r[1])) for r in await cur.fetchall()]


async def text_sample(conn: psycopg.AsyncConnection, ids: list[str]) -> str:
    """The start of the documents' text (first 20 units, 4,000 characters each)."""
    row = await (await conn.execute(TEXT_SAMPLE_SQL, {"ids": ids})).fetchone()
    return str(row[0] or "") if row else ""
