"""SQL of saved documents (documents with source = 'saved', written by the write tools)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from pgrag.store.changes import changing
from pgrag.store.rows import LockedSaved, SavedRow

INSERT_SQL = """
INSERT INTO pgrag.documents (id, collection_id, path, folder, name, file_type, source, status,
                             tags, metadata)
VALUES (%(id)s, %(cid)s, %(path)s, %(folder)s, %(name)s, 'md', 'saved', 'processing',
        %(tags)s, %(metadata)s)
"""
# a document's collection never changes; the lock then names it (on Citus, one shard:
# FOR UPDATE over every shard is refused)
COLLECTION_SQL = "SELECT collection_id FROM pgrag.documents WHERE id = %s"
LOCK_SQL = """
SELECT id, source, title, tags, metadata, created_at, collection_id
FROM pgrag.documents WHERE collection_id = %s AND id = %s FOR UPDATE
"""
MOVE_SQL = """
UPDATE pgrag.documents SET path = %(path)s, folder = %(folder)s, name = %(name)s,
       tags = %(tags)s
 WHERE collection_id = %(cid)s AND id = %(id)s
"""

FIND_SQL = """
SELECT d.id::text AS document_id, d.title, d.path, d.folder, d.tags, d.metadata,
       d.created_at, d.modified_at, c.name AS collection,
       (SELECT string_agg(u.body, E'\\n\\n' ORDER BY u.number)
          FROM pgrag.units u
         WHERE u.collection_id = d.collection_id AND u.document_id = d.id AND u.body <> '')
       AS content
FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
WHERE d.source = 'saved'
  AND (%(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[]))
  AND (%(topic)s::text IS NULL
       OR d.title ILIKE %(topic)s ESCAPE '\\' OR d.metadata ->> 'topic' ILIKE %(topic)s ESCAPE '\\')
  AND (%(tags)s::text[] IS NULL OR d.tags && %(tags)s::text[])
ORDER BY d.created_at DESC, d.id
LIMIT %(limit)s
"""


async def insert(
    conn: psycopg.AsyncConnection,
    *,
    doc_id: UUID,
    collection_id: int,
    path: str,
    folder: str,
    name: str,
    tags: list[str],
    metadata: dict[str, Any],
) -> None:
    """A new saved document, `processing` until its first version is written."""
    async with changing(conn, "INSERT"):
        await conn.execute(
            INSERT_SQL,
            {
                "id": doc_id,
                "cid": collection_id,
                "path": path,
                "folder": folder,
                "name": name,
                "tags": tags,
                "metadata": Jsonb(metadata),
            },
        )


async def lock(conn: psycopg.AsyncConnection, doc_id: str) -> LockedSaved | None:
    """The document row, locked for the caller's transaction; None when it is gone."""
    row = await (await conn.execute(COLLECTION_SQL, (doc_id,))).fetchone()
    if row is None:
        return None
    async with conn.cursor(row_factory=class_row(LockedSaved)) as cur:
        await cur.execute(LOCK_SQL, (row[0], doc_id))
        return await cur.fetchone()


async def move(
    conn: psycopg.AsyncConnection,
    *,
    doc_id: UUID,
    collection_id: int,
    path: str,
    folder: str,
    name: str,
    tags: list[str],
) -> None:
    """New path (its title or folder changed) and tags."""
    async with changing(conn, "UPDATE"):
        await conn.execute(
            MOVE_SQL,
            {
                "id": doc_id,
                "cid": collection_id,
                "path": path,
                "folder": folder,
                "name": name,
                "tags": tags,
            },
        )


async def find(
    conn: psycopg.AsyncConnection,
    scope: list[str] | None,
    *,
    topic: str | None,
    tags: list[str] | None,
    limit: int,
) -> list[SavedRow]:
    """Saved documents, newest first, whose title or topic matches the ILIKE pattern `topic`
    and that have any of `tags` (None: no condition)."""
    async with conn.cursor(row_factory=class_row(SavedRow)) as cur:
        await cur.execute(FIND_SQL, {"scope": scope, "topic": topic, "tags": tags, "limit": limit})
        return await cur.fetchall()
