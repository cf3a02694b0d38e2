"""Deleting documents outside an ingest version: a file gone from its folder, a folder
removed in watch mode, a REST or write-toolset delete.

Each delete locks its documents as a new version does, takes their vectors and chunks out
of the per-language and BM25 sums (pgrag.write_language_sums, pgrag.write_bm25_sums: on
Citus no trigger does it; a no-op where the triggers exist), unlinks the graph nodes
pointing at them or their chunks (pgrag.unlink_graph: on Citus no foreign key sets the
links NULL; a no-op where the keys exist), deletes them with their units, chunks and
embeddings (ON DELETE CASCADE) and announces the change, in one transaction. Every
statement names the collection: on Citus, the one shard it runs on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import psycopg

from pgrag.store import bm25_sums
from pgrag.store.changes import announce

MISSING_SQL = """
SELECT id FROM pgrag.documents
WHERE collection_id = %s AND source = 'file' AND metadata ->> 'root' = %s AND NOT (path = ANY(%s))
FOR UPDATE
"""
UNDER_PATHS_SQL = """
SELECT id FROM pgrag.documents
WHERE collection_id = %s AND metadata ->> 'root' = %s AND (path = ANY(%s) OR path ^@ ANY(%s))
FOR UPDATE
"""
LOCK_IDS_SQL = """
SELECT id FROM pgrag.documents WHERE collection_id = %s AND id = ANY(%s::uuid[]) FOR UPDATE
"""
COLLECTION_OF_SQL = "SELECT collection_id FROM pgrag.documents WHERE id = %s::uuid"
FORGET_SUMS_SQL = "SELECT pgrag.write_language_sums(%s, d, -1) FROM unnest(%s::uuid[]) d"
UNLINK_GRAPH_SQL = "SELECT pgrag.unlink_graph(%s, %s::uuid[], true)"
DELETE_SQL = """
DELETE FROM pgrag.documents WHERE collection_id = %s AND id = ANY(%s::uuid[]) RETURNING path
"""


async def _delete_locked(
    conn: psycopg.AsyncConnection, collection_id: int, select: str, params: tuple[Any, ...]
) -> list[str]:
    """Delete the documents `select` locks (ids of one collection); the deleted paths."""
    async with conn.transaction():
        ids = [r[0] for r in await (await conn.execute(select, params)).fetchall()]
        if not ids:
            return []
        await conn.execute(FORGET_SUMS_SQL, (collection_id, ids))
        await bm25_sums.forget(conn, collection_id, ids)
        await conn.execute(UNLINK_GRAPH_SQL, (collection_id, ids))
        rows = await (await conn.execute(DELETE_SQL, (collection_id, ids))).fetchall()
        await announce(conn, "DELETE")
    return [r[0] for r in rows]


async def remove_missing(
    conn: psycopg.AsyncConnection, collection_id: int, root: str, present: list[str]
) -> list[str]:
    """Delete the ingested files of `root` that are no longer there; their paths."""
    return await _delete_locked(conn, collection_id, MISSING_SQL, (collection_id, root, present))


async def remove_paths(
    conn: psycopg.AsyncConnection, collection_id: int, root: str, paths: list[str]
) -> list[str]:
    """Delete the documents of `root` at these paths or under them (a deleted folder is one
    path); their paths."""
    folders = [p.rstrip("/") + "/" for p in paths]
    return await _delete_locked(
        conn, collection_id, UNDER_PATHS_SQL, (collection_id, root, paths, folders)
    )


async def delete_documents(
    conn: psycopg.AsyncConnection, collection_id: int, document_ids: Sequence[UUID | str]
) -> list[str]:
    """Delete these documents of one collection; the paths of those that were there."""
    ids = [str(i) for i in document_ids]
    return await _delete_locked(conn, collection_id, LOCK_IDS_SQL, (collection_id, ids))


async def delete_document(conn: psycopg.AsyncConnection, document_id: str) -> None:
    """Delete a document by id alone (its collection looked up first)."""
    row = await (await conn.execute(COLLECTION_OF_SQL, (document_id,))).fetchone()
    if row is not None:
        await delete_documents(conn, row[0], [document_id])
