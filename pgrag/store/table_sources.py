"""SQL of table sources: the registry, the queue, reading rows by key, and the documents of
rows (sql/migrations/0030_table_sources.sql, sql/functions/80_table_sources.sql)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

CHANNEL = "pgrag_sources"
LISTEN_SQL = "LISTEN " + CHANNEL


@dataclass(frozen=True)
class SourceRow:
    """A registered source as the drain reads it."""

    id: int
    name: str
    relation: str
    id_columns: list[str]
    text_columns: list[str]
    title_column: str | None
    metadata_columns: list[str]
    collection: str
    state: str
    failure: str | None


@dataclass(frozen=True)
class SourceStats:
    """A source as `pgrag source list`, status, the console and metrics show it."""

    id: int
    name: str
    relation: str
    collection: str
    state: str
    failure: str | None
    indexed: int
    failed: int
    queued: int
    backfill_left: int
    pending: int
    backfill_done: int
    backfill_total: int | None
    backfill_started_at: datetime | None
    lag_seconds: float
    synced_at: datetime | None


@dataclass(frozen=True)
class TableRow:
    """One row of a source's table as it is now."""

    key: dict[str, Any]
    title: str | None
    texts: list[str | None]
    metadata: dict[str, Any]


@dataclass(frozen=True)
class RowDocument:
    """The document of a row, as far as the drain compares it."""

    id: UUID
    path: str
    content_hash: str | None
    status: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class FailedRow:
    """A row that could not become a document, and why (documents.error_code/detail)."""

    key: dict[str, Any]
    code: str
    reason: str


SOURCE_SQL = """
SELECT id, name, relation::text AS relation, id_columns, text_columns, title_column,
       metadata_columns, collection, state, failure
FROM pgrag.table_sources
"""
ADD_SQL = """
SELECT pgrag.add_table_source(%(table)s::regclass, %(text)s, %(id)s, %(title)s,
                              %(metadata)s, %(collection)s, %(name)s)
"""
REMOVE_SQL = "SELECT pgrag.remove_table_source(%s)"
STATS_SQL = "SELECT * FROM pgrag.table_source_stats()"
PROBLEM_SQL = "SELECT pgrag.table_source_problem(%s)"
BACKFILL_SQL = "SELECT pgrag.table_source_backfill(%s, %s)"
# the oldest entries first, up to a number of keys (a long entry split); another drainer's
# claimed entries are skipped, not waited for
CLAIM_SQL = "SELECT entry, raw, key FROM pgrag.table_source_claim(%s, %s)"
SPLIT_SQL = "SELECT pgrag.table_source_split(%s, %s, %s)"
SPLIT_WINDOW = 100  # entries at the queue's head whose length is checked
# one drainer per row at a time: a row another drainer holds waits for its next turn (its
# entries stay queued), so an older read of a row never overwrites a newer one
ROW_LOCKS_SQL = """
SELECT k FROM unnest(%s::jsonb[]) k
WHERE pg_try_advisory_xact_lock(hashtextextended(%s::text || '|' || k::text, 1952539244))
"""
UNQUEUE_SQL = "DELETE FROM pgrag.source_queue WHERE source_id = %s AND id = ANY(%s::bigint[])"
# the keys of claimed entries another drainer held, back as one entry (as old as the oldest)
REQUEUE_SQL = """
INSERT INTO pgrag.source_queue (source_id, keys, queued_at)
SELECT %s, %s::text[], min(queued_at) FROM pgrag.source_queue
WHERE source_id = %s AND id = ANY(%s::bigint[])
"""
ROWS_SQL = "SELECT key, title, texts, metadata FROM pgrag.table_source_rows(%s, %s)"
KEYS_SQL = """
SELECT id, source_key FROM pgrag.documents WHERE collection_id = %s AND table_source_id = %s
"""
MISSING_SQL = "SELECT pgrag.table_source_missing(%s, %s)"
DOCUMENTS_SQL = """
SELECT id, path, content_hash, status, metadata FROM pgrag.documents
WHERE collection_id = %s AND path = ANY(%s)
"""
SOURCE_DOCUMENTS_SQL = """
SELECT id FROM pgrag.documents WHERE table_source_id = %s AND collection_id = %s LIMIT %s
"""
TAG_DOCUMENT_SQL = """
UPDATE pgrag.documents SET source = 'table', table_source_id = %s, source_key = %s
WHERE collection_id = %s AND id = %s
"""
METADATA_SQL = """
UPDATE pgrag.documents SET metadata = %s, updated_at = now() WHERE collection_id = %s AND id = %s
"""
FAIL_SQL = """
UPDATE pgrag.table_sources SET state = 'failed', failure = %s, updated_at = now()
WHERE id = %s AND state <> 'removed'
"""
BACKFILL_STATE_SQL = "SELECT backfill_done, backfill_total FROM pgrag.table_sources WHERE id = %s"
# the most rows any live source of a collection still has to backfill
BACKFILL_LEFT_SQL = """
SELECT coalesce(max(greatest(coalesce(backfill_total, 0) - backfill_done, 0)), 0)
FROM pgrag.table_sources WHERE collection = %s AND state IN ('backfilling', 'ready')
"""
SYNCED_SQL = "UPDATE pgrag.table_sources SET synced_at = now() WHERE id = %s"
FAILED_ROWS_SQL = """
SELECT source_key, error_code, error_detail FROM pgrag.documents
WHERE table_source_id = %s AND status = 'failed' ORDER BY path LIMIT %s
"""
FORGET_SQL = "DELETE FROM pgrag.table_sources WHERE id = %s AND state = 'removed'"


async def listen(conn: psycopg.AsyncConnection) -> None:
    """Subscribe `conn` (autocommit) to the sources' change notifications."""
    await conn.execute(LISTEN_SQL)


async def sources(conn: psycopg.AsyncConnection, name: str | None = None) -> list[SourceRow]:
    """The registered sources (or the one named), by name."""
    where = " WHERE name = %s" if name is not None else ""
    async with conn.cursor(row_factory=class_row(SourceRow)) as cur:
        await cur.execute(SOURCE_SQL + where + " ORDER BY name", (name,) if name else ())
        return await cur.fetchall()


async def add(
    conn: psycopg.AsyncConnection,
    *,
    table: str,
    text_columns: list[str],
    id_columns: list[str] | None,
    title_column: str | None,
    metadata_columns: list[str],
    collection: str,
    name: str | None,
) -> int:
    params = {
        "table": table,
        "text": text_columns,
        "id": id_columns,
        "title": title_column,
        "metadata": metadata_columns,
        "collection": collection,
        "name": name,
    }
    row = await (await conn.execute(ADD_SQL, params)).fetchone()
    assert row is not None
    return int(row[0])


async def remove(conn: psycopg.AsyncConnection, name: str) -> bool:
    row = await (await conn.execute(REMOVE_SQL, (name,))).fetchone()
    return bool(row and row[0])


async def stats(conn: psycopg.AsyncConnection) -> list[SourceStats]:
    async with conn.cursor(row_factory=class_row(SourceStats)) as cur:
        await cur.execute(STATS_SQL)
        return await cur.fetchall()


async def problem(conn: psycopg.AsyncConnection, source_id: int) -> str | None:
    row = await (await conn.execute(PROBLEM_SQL, (source_id,))).fetchone()
    return row[0] if row else None


async def backfill(conn: psycopg.AsyncConnection, source_id: int, batch: int) -> int:
    """Queue the backfill's next keys (one statement: atomic with its cursor)."""
    row = await (await conn.execute(BACKFILL_SQL, (source_id, batch))).fetchone()
    return int(row[0]) if row else 0


async def backfill_state(conn: psycopg.AsyncConnection, source_id: int) -> tuple[int, int | None]:
    """(rows queued so far, rows there were when the backfill began)."""
    row = await (await conn.execute(BACKFILL_STATE_SQL, (source_id,))).fetchone()
    return (int(row[0]), row[1]) if row else (0, None)


async def backfill_left(conn: psycopg.AsyncConnection, collection: str) -> int:
    """The most rows a live source of the collection still has to queue for its backfill."""
    row = await (await conn.execute(BACKFILL_LEFT_SQL, (collection,))).fetchone()
    return int(row[0]) if row else 0


@dataclass(frozen=True)
class Claimed:
    """A queued key: its entry, its text as queued, and the key (None: a TRUNCATE)."""

    entry: int
    raw: str | None
    key: dict[str, Any] | None


async def split(conn: psycopg.AsyncConnection, source_id: int, limit: int) -> None:
    """Split the long entries at the queue's head (run in its own transaction)."""
    await conn.execute(SPLIT_SQL, (source_id, limit, SPLIT_WINDOW))


async def claim(conn: psycopg.AsyncConnection, source_id: int, limit: int) -> list[Claimed]:
    """Up to `limit` queued keys, their entries locked until the caller's transaction ends."""
    rows = await (await conn.execute(CLAIM_SQL, (source_id, limit))).fetchall()
    return [Claimed(int(r[0]), r[1], r[2]) for r in rows]


def key_text(key: dict[str, Any]) -> str:
    """A key as one canonical JSON text (the same for equal keys)."""
    return json.dumps(key, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


async def lock_rows(
    conn: psycopg.AsyncConnection, source_id: int, keys: list[dict[str, Any]]
) -> set[str]:
    """The keys (as key_text) this transaction now holds; the others are another drainer's."""
    cur = await conn.execute(ROW_LOCKS_SQL, ([Jsonb(k) for k in keys], source_id))
    return {key_text(r[0]) for r in await cur.fetchall()}


async def unqueue(
    conn: psycopg.AsyncConnection, source_id: int, ids: list[int], keep: list[str]
) -> None:
    """Delete the claimed entries `ids`, queueing again the keys (as queued) in `keep`."""
    if keep:
        await conn.execute(REQUEUE_SQL, (source_id, keep, source_id, ids))
    await conn.execute(UNQUEUE_SQL, (source_id, ids))


async def rows(
    conn: psycopg.AsyncConnection, source_id: int, keys: list[dict[str, Any]]
) -> list[TableRow]:
    cur = await conn.execute(ROWS_SQL, (source_id, Jsonb(keys)))
    return [TableRow(r[0], r[1], list(r[2]), r[3]) for r in await cur.fetchall()]


async def orphans(conn: psycopg.AsyncConnection, source_id: int, collection_id: int) -> list[UUID]:
    """The documents of the source whose rows are gone (after a TRUNCATE): their keys are
    read from the documents, then looked up in the table (two statements: on Citus the
    documents are distributed and the table is local)."""
    docs = await (await conn.execute(KEYS_SQL, (collection_id, source_id))).fetchall()
    if not docs:
        return []
    by_key = {key_text(key): doc_id for doc_id, key in docs}
    cur = await conn.execute(MISSING_SQL, (source_id, Jsonb([key for _, key in docs])))
    return [by_key[key_text(r[0])] for r in await cur.fetchall()]


async def documents(
    conn: psycopg.AsyncConnection, collection_id: int, paths: list[str]
) -> dict[str, RowDocument]:
    async with conn.cursor(row_factory=class_row(RowDocument)) as cur:
        await cur.execute(DOCUMENTS_SQL, (collection_id, paths))
        return {d.path: d for d in await cur.fetchall()}


async def source_documents(
    conn: psycopg.AsyncConnection, source_id: int, collection_id: int, limit: int
) -> list[UUID]:
    cur = await conn.execute(SOURCE_DOCUMENTS_SQL, (source_id, collection_id, limit))
    return [r[0] for r in await cur.fetchall()]


async def tag_document(
    conn: psycopg.AsyncConnection,
    ids: tuple[int, UUID],
    source_id: int,
    key: dict[str, Any],
) -> None:
    """Mark a document as a row's (collection, document ids)."""
    collection_id, document_id = ids
    await conn.execute(TAG_DOCUMENT_SQL, (source_id, Jsonb(key), collection_id, document_id))


async def set_metadata(
    conn: psycopg.AsyncConnection, ids: tuple[int, UUID], metadata: dict[str, Any]
) -> None:
    collection_id, document_id = ids
    await conn.execute(METADATA_SQL, (Jsonb(metadata), collection_id, document_id))


async def fail(conn: psycopg.AsyncConnection, source_id: int, reason: str) -> None:
    await conn.execute(FAIL_SQL, (reason, source_id))


async def synced(conn: psycopg.AsyncConnection, source_id: int) -> None:
    await conn.execute(SYNCED_SQL, (source_id,))


async def forget(conn: psycopg.AsyncConnection, source_id: int) -> None:
    """Delete a removed source's registry row (its documents are gone)."""
    await conn.execute(FORGET_SQL, (source_id,))


async def failed_rows(conn: psycopg.AsyncConnection, source_id: int, limit: int) -> list[FailedRow]:
    """The first `limit` failed rows of a source, with their code and reason."""
    cur = await conn.execute(FAILED_ROWS_SQL, (source_id, limit))
    return [FailedRow(r[0], r[1] or "", r[2] or "") for r in await cur.fetchall()]
