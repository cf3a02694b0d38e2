"""SQL of the compatibility toolsets: LDIMS's per-document metadata, and the `rag` toolset's integer
document ids (the UUID's first 52 bits, computed the same way here and in Python), listings
and chunk texts. `scope` is the list of collections the caller may see (None = all)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg
from psycopg.rows import class_row


@dataclass
class DocumentDetails:
    document_id: str
    name: str
    path: str
    file_type: str | None
    size_bytes: int | None
    status: str | None
    created_at: datetime | None
    modified_at: datetime | None
    ingested_at: datetime | None
    submitter: str | None
    author: str | None
    tags: list[str] | None


@dataclass
class ListedDocument:
    document_id: str
    name: str
    file_type: str
    size_bytes: int | None
    created_at: datetime | None
    chunk_count: int


DOCUMENTS_SQL = """
SELECT d.id::text AS document_id, d.name, d.path, d.file_type, d.size_bytes, d.status,
       d.created_at, d.modified_at, d.ingested_at, d.submitter, d.author, d.tags
FROM pgrag.documents d WHERE d.id = ANY(%s::uuid[])
"""

# the `rag` toolset's integer id: the UUID's first 52 bits (13 hex digits, exact in JSON)
INT_ID_SQL = "(('x' || left(replace(d.id::text, '-', ''), 13))::bit(52)::bigint)"

IDS_BY_INT_SQL = f"""
SELECT d.id::text FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
WHERE {INT_ID_SQL} = ANY(%(ids)s::bigint[])
  AND (%(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[]))
"""

# the hit chunks' own text (`rag`'s `content` is the chunk; content_mode=full would be
# the whole document) and position
CHUNKS_SQL = "SELECT id, ordinal, content FROM pgrag.chunks WHERE id = ANY(%s::bigint[])"

LIST_SQL = """
SELECT d.id::text AS document_id, d.name, d.file_type, d.size_bytes,
       coalesce(d.created_at, d.ingested_at) AS created_at,
       (SELECT count(*) FROM pgrag.chunks ch
        WHERE ch.document_id = d.id AND ch.collection_id = d.collection_id) AS chunk_count
FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
WHERE d.status = 'ready'
  AND (%(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[]))
ORDER BY d.path, d.id
OFFSET %(offset)s LIMIT %(limit)s
"""
COUNT_SQL = """
SELECT count(*) FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
WHERE d.status = 'ready' AND (%(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[]))
"""
CHUNK_COUNT_SQL = "SELECT count(*) FROM pgrag.chunks WHERE document_id = %s::uuid"


async def document_details(
    conn: psycopg.AsyncConnection, ids: list[str]
) -> dict[str, DocumentDetails]:
    """Metadata of the given documents by id (those the connection may see)."""
    async with conn.cursor(row_factory=class_row(DocumentDetails)) as cur:
        await cur.execute(DOCUMENTS_SQL, (ids,))
        return {r.document_id: r for r in await cur.fetchall()}


async def uuids_for_int_ids(
    conn: psycopg.AsyncConnection, ids: list[int], scope: list[str] | None
) -> list[str]:
    """The documents whose `rag` integer id is in `ids`."""
    rows = await (await conn.execute(IDS_BY_INT_SQL, {"ids": ids, "scope": scope})).fetchall()
    return [r[0] for r in rows]


async def chunk_texts(conn: psycopg.AsyncConnection, ids: list[int]) -> dict[int, tuple[int, str]]:
    """chunk id -> (ordinal, text) for the given chunks."""
    rows = await (await conn.execute(CHUNKS_SQL, (ids,))).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


async def ready_documents(
    conn: psycopg.AsyncConnection, scope: list[str] | None, offset: int, limit: int
) -> tuple[list[ListedDocument], int]:
    """(one page of the ready documents by path, how many there are in all)."""
    async with conn.cursor(row_factory=class_row(ListedDocument)) as cur:
        await cur.execute(LIST_SQL, {"scope": scope, "offset": offset, "limit": limit})
        rows = await cur.fetchall()
    total = await (await conn.execute(COUNT_SQL, {"scope": scope})).fetchone()
    return rows, int(total[0]) if total else 0


async def chunk_count(conn: psycopg.AsyncConnection, document_id: str) -> int:
    row = await (await conn.execute(CHUNK_COUNT_SQL, (document_id,))).fetchone()
    return int(row[0]) if row else 0
