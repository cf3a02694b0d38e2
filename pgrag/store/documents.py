"""Writing documents: status changes, and one transaction per new version of a document
(its units, chunks and the vectors already known; the others follow, see store/vectors)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from pgrag.errors import ErrorCode, PgragError
from pgrag.language import detect_language
from pgrag.store import bm25_sums
from pgrag.store.changes import announce, changing
from pgrag.store.reindex import ACTIVE_SET_SQL, WRITER_LOCK_SQL
from pgrag.store.vectors import LANGUAGE_SUMS_SQL, insert_vectors


class UnitIn(Protocol):
    """A unit (page, section, sheet, slide) as written: what ingestion's parsers produce.
    A protocol (read-only attributes), so that the store depends on no ingestion module."""

    @property
    def kind(self) -> str: ...
    @property
    def number(self) -> int: ...
    @property
    def title(self) -> str | None: ...
    @property
    def body(self) -> str: ...
    @property
    def meta(self) -> dict[str, Any]: ...
    @property
    def rows(self) -> list[list[str]] | None: ...


class ChunkDraftIn(Protocol):
    """A chunk's text and position in its unit, as the chunker cuts it."""

    @property
    def content(self) -> str: ...
    @property
    def token_count(self) -> int: ...
    @property
    def char_start(self) -> int | None: ...
    @property
    def char_end(self) -> int | None: ...
    @property
    def row_start(self) -> int | None: ...
    @property
    def row_end(self) -> int | None: ...


@dataclass(frozen=True)
class KnownDocument:
    id: UUID
    content_hash: str | None
    status: str
    error_code: str | None


@dataclass
class DocumentFields:
    path: str
    folder: str
    name: str
    file_type: str
    size_bytes: int
    content_hash: str
    title: str | None
    author: str | None
    created_at: datetime | None
    modified_at: datetime | None
    outline: dict[str, Any]
    metadata: dict[str, Any]


@dataclass
class ChunkRow:
    unit_index: int  # index into the version's units
    draft: ChunkDraftIn
    heading: str | None
    content_hash: bytes
    page: int | None = None
    section: str | None = None
    sheet: str | None = None
    slide: int | None = None
    context: str | None = None  # the document's context (ingest/context), kept apart


KNOWN_SQL = """
SELECT path, id, content_hash, status, error_code FROM pgrag.documents
WHERE collection_id = %s AND path = ANY(%s)
"""

# a new file is visible at once as `processing` (no chunks yet); a changed one keeps serving
# its old chunks until the new version commits
MARK_PROCESSING_SQL = """
INSERT INTO pgrag.documents (collection_id, path, folder, name, file_type, status, progress, metadata)
VALUES (%(cid)s, %(path)s, %(folder)s, %(name)s, %(file_type)s, 'processing', 0, %(metadata)s)
ON CONFLICT (collection_id, path) DO UPDATE
   SET status = 'processing', progress = 0, error_code = NULL, error_detail = NULL,
       updated_at = EXCLUDED.updated_at  -- now(), which Citus refuses here (not immutable)
RETURNING id
"""

MARK_FAILED_SQL = """
UPDATE pgrag.documents
   SET status = %(status)s, error_code = %(code)s, error_detail = %(detail)s,
       content_hash = %(hash)s, size_bytes = %(size)s, progress = 0, updated_at = now()
 WHERE collection_id = %(cid)s AND id = %(id)s
"""

LOCK_SQL = "SELECT id FROM pgrag.documents WHERE collection_id = %s AND id = %s FOR UPDATE"


class EmbeddingSetChanged(PgragError):
    """The collection switched to another embedding set (a reindex) after this version was
    embedded: its vectors belong to a set searches no longer use."""

    code = ErrorCode.INVALID_ARGUMENT

    def __init__(self, active_set_id: int | None) -> None:
        super().__init__(
            "the collection was reindexed to another embedding model while this document was "
            "being embedded: nothing was written; retry with the collection's current model",
            detail={"active_set_id": active_set_id},
        )
        self.active_set_id = active_set_id


# every statement of a version names its collection: on Citus, the one shard it runs on
DELETE_UNITS_SQL = "DELETE FROM pgrag.units WHERE collection_id = %s AND document_id = %s"
DELETE_CHUNKS_SQL = "DELETE FROM pgrag.chunks WHERE collection_id = %s AND document_id = %s"
# the graph's links to the replaced chunks set NULL, as the foreign key does on a single
# server (sql/functions/60_graph.sql; a no-op where the key exists)
UNLINK_CHUNKS_SQL = "SELECT pgrag.unlink_graph(%s, ARRAY[%s::uuid], false)"

INSERT_UNITS_SQL = """
INSERT INTO pgrag.units (collection_id, document_id, kind, number, title, body, meta)
SELECT %s, %s, kind, number, title, body, meta
FROM unnest(%s::text[], %s::int[], %s::text[], %s::text[], %s::jsonb[]) AS u(kind, number, title, body, meta)
RETURNING id, kind, number
"""

COPY_ROWS_SQL = "COPY pgrag.sheet_rows (collection_id, unit_id, row_number, cells) FROM STDIN"

INSERT_CHUNKS_SQL = """
INSERT INTO pgrag.chunks (document_id, collection_id, unit_id, ordinal, heading, content,
                          content_hash, token_count, char_start, char_end, page, section,
                          sheet, row_start, row_end, slide, lang, context)
SELECT %s, %s, unit_id, ordinal, heading, content, content_hash, token_count, char_start,
       char_end, page, section, sheet, row_start, row_end, slide, lang, context
FROM unnest(%s::bigint[], %s::int[], %s::text[], %s::text[], %s::bytea[], %s::int[], %s::int[],
            %s::int[], %s::int[], %s::text[], %s::text[], %s::int[], %s::int[], %s::int[],
            %s::text[], %s::text[])
     AS c(unit_id, ordinal, heading, content, content_hash, token_count, char_start, char_end,
          page, section, sheet, row_start, row_end, slide, lang, context)
ORDER BY ordinal
RETURNING id, ordinal
"""

FINISH_SQL = """
UPDATE pgrag.documents
   SET folder = %(folder)s, name = %(name)s, file_type = %(file_type)s, size_bytes = %(size)s,
       content_hash = %(hash)s, title = %(title)s, author = %(author)s,
       created_at = %(created)s, modified_at = %(modified)s, outline = %(outline)s,
       metadata = %(metadata)s, status = 'ready', progress = 100, error_code = NULL,
       error_detail = NULL, vectors_pending = %(pending)s, ingested_at = now(),
       updated_at = now()
 WHERE collection_id = %(cid)s AND id = %(id)s
"""


async def known_documents(
    conn: psycopg.AsyncConnection, collection_id: int, paths: list[str]
) -> dict[str, KnownDocument]:
    rows = await (await conn.execute(KNOWN_SQL, (collection_id, paths))).fetchall()
    return {r[0]: KnownDocument(r[1], r[2], r[3], r[4]) for r in rows}


async def mark_processing(
    conn: psycopg.AsyncConnection, collection_id: int, fields: DocumentFields
) -> UUID:
    async with changing(conn, "INSERT", "UPDATE"):  # an upsert: the trigger fires both
        row = await (
            await conn.execute(
                MARK_PROCESSING_SQL,
                {
                    "cid": collection_id,
                    "path": fields.path,
                    "folder": fields.folder,
                    "name": fields.name,
                    "file_type": fields.file_type,
                    "metadata": Jsonb(fields.metadata),
                },
            )
        ).fetchone()
    if row is None:  # an upsert with RETURNING always answers a row
        raise PgragError("the document row was not written", code=ErrorCode.INTERNAL)
    document_id: UUID = row[0]
    return document_id


async def mark_failed(
    conn: psycopg.AsyncConnection,
    collection_id: int,
    document_id: UUID,
    *,
    status: str,
    code: str,
    detail: str,
    content_hash: str | None,
    size: int | None,
) -> None:
    async with changing(conn, "UPDATE"):
        await conn.execute(
            MARK_FAILED_SQL,
            {
                "cid": collection_id,
                "id": document_id,
                "status": status,
                "code": code,
                "detail": detail,
                "hash": content_hash,
                "size": size,
            },
        )


async def _write_units(
    conn: psycopg.AsyncConnection, collection_id: int, document_id: UUID, units: Sequence[UnitIn]
) -> list[int]:
    """Insert a version's units and their sheet rows; the units' ids, in order."""
    unit_ids: list[int] = []
    if units:
        cur = await conn.execute(
            INSERT_UNITS_SQL,
            (
                collection_id,
                document_id,
                [u.kind for u in units],
                [u.number for u in units],
                [u.title for u in units],
                [u.body for u in units],
                [Jsonb(u.meta) for u in units],
            ),
        )
        by_key = {(kind, number): uid for uid, kind, number in await cur.fetchall()}
        unit_ids = [by_key[(u.kind, u.number)] for u in units]
    sheet_units = [(uid, u) for uid, u in zip(unit_ids, units, strict=True) if u.rows]
    if sheet_units:
        async with conn.cursor() as cur, cur.copy(COPY_ROWS_SQL) as copy:
            for uid, u in sheet_units:
                for n, cells in enumerate(u.rows or [], start=1):
                    await copy.write_row((collection_id, uid, n, cells))
    return unit_ids


def _languages(chunks: list[ChunkRow]) -> list[str]:
    """Each chunk's language: milliseconds of CPU per chunk, so run in a worker thread and
    before the version's transaction (a large file neither stalls the server nor holds
    its locks meanwhile)."""
    return [detect_language(c.draft.content) for c in chunks]


def _chunk_params(
    ids: tuple[UUID, int], unit_ids: list[int], chunks: list[ChunkRow], langs: list[str]
) -> tuple[Any, ...]:
    document_id, collection_id = ids
    return (
        document_id,
        collection_id,
        [unit_ids[c.unit_index] for c in chunks],
        list(range(1, len(chunks) + 1)),
        [c.heading for c in chunks],
        [c.draft.content for c in chunks],
        [c.content_hash for c in chunks],
        [c.draft.token_count for c in chunks],
        [c.draft.char_start for c in chunks],
        [c.draft.char_end for c in chunks],
        [c.page for c in chunks],
        [c.section for c in chunks],
        [c.sheet for c in chunks],
        [c.draft.row_start for c in chunks],
        [c.draft.row_end for c in chunks],
        [c.slide for c in chunks],
        langs,
        [c.context for c in chunks],
    )


async def _write_chunks(
    conn: psycopg.AsyncConnection,
    ids: tuple[int, UUID, int],
    unit_ids: list[int],
    chunks: list[ChunkRow],
    vectors: Sequence[np.ndarray | None],
    langs: list[str],
) -> list[int]:
    """Insert a version's chunks and the vectors already known (ids: collection, document,
    set), add them to the BM25 and per-language sums; the chunks' ids, in order."""
    collection_id, document_id, set_id = ids
    if not chunks:
        return []
    params = _chunk_params((document_id, collection_id), unit_ids, chunks, langs)
    cur = await conn.execute(INSERT_CHUNKS_SQL, params)
    by_ordinal = {ordinal: cid for cid, ordinal in await cur.fetchall()}
    await bm25_sums.write(conn, collection_id, document_id, 1)
    chunk_ids = [by_ordinal[i] for i in range(1, len(chunks) + 1)]
    known = [i for i, v in enumerate(vectors) if v is not None]
    if known:
        await insert_vectors(
            conn,
            (collection_id, set_id, document_id),
            [chunk_ids[i] for i in known],
            [vectors[i] for i in known],  # type: ignore[misc]
            [langs[i] for i in known],
        )
        await conn.execute(LANGUAGE_SUMS_SQL, (collection_id, document_id, 1))
    return chunk_ids


async def write_version(
    conn: psycopg.AsyncConnection,
    *,
    document_id: UUID,
    collection_id: int,
    set_id: int,
    fields: DocumentFields,
    units: Sequence[UnitIn],
    chunks: list[ChunkRow],
    vectors: Sequence[np.ndarray | None],
) -> list[int] | None:
    """Replace the document's units, chunks and embeddings in one transaction; `vectors`
    holds each chunk's vector, or None where it is still to be computed (the document then
    counts it in `vectors_pending`). The new chunks' ids, in order. None, with nothing
    written, when the document was deleted meanwhile (e.g. by the REST API while its new
    version was being prepared); EmbeddingSetChanged, with nothing written, when a reindex
    switched the collection to another model meanwhile."""
    langs = await asyncio.to_thread(_languages, chunks)
    async with conn.transaction():
        # first: a reindex switch then waits for this write (and embeds its chunks) or has
        # switched and this write sees it; the switch updates document rows while it holds it
        await conn.execute(WRITER_LOCK_SQL, (collection_id,))
        if await (await conn.execute(LOCK_SQL, (collection_id, document_id))).fetchone() is None:
            return None
        row = await (await conn.execute(ACTIVE_SET_SQL, (collection_id,))).fetchone()
        active = row[0] if row is not None else None
        if active != set_id:
            raise EmbeddingSetChanged(active)
        await conn.execute(LANGUAGE_SUMS_SQL, (collection_id, document_id, -1))
        await bm25_sums.write(conn, collection_id, document_id, -1)
        await conn.execute(UNLINK_CHUNKS_SQL, (collection_id, document_id))
        await conn.execute(DELETE_CHUNKS_SQL, (collection_id, document_id))
        await conn.execute(DELETE_UNITS_SQL, (collection_id, document_id))
        unit_ids = await _write_units(conn, collection_id, document_id, units)
        chunk_ids = await _write_chunks(
            conn, (collection_id, document_id, set_id), unit_ids, chunks, vectors, langs
        )
        await conn.execute(
            FINISH_SQL,
            {
                "cid": collection_id,
                "id": document_id,
                "folder": fields.folder,
                "name": fields.name,
                "file_type": fields.file_type,
                "size": fields.size_bytes,
                "hash": fields.content_hash,
                "title": fields.title,
                "author": fields.author,
                "created": fields.created_at,
                "modified": fields.modified_at,
                "outline": Jsonb(fields.outline),
                "metadata": Jsonb(fields.metadata),
                "pending": sum(1 for v in vectors if v is None),
            },
        )
        await announce(conn, "UPDATE")
    return chunk_ids


async def compact_language_sums(conn: psycopg.AsyncConnection, set_id: int | None) -> None:
    """Fold the per-statement vector sums the triggers appended (sql/functions/30_semantic)."""
    await conn.execute("SELECT pgrag.compact_language_sums(%s)", (set_id,))


async def recount_language_sums(conn: psycopg.AsyncConnection, collection_id: int) -> None:
    """Recount the active set's per-language sums from its vectors (30_semantic)."""
    await conn.execute(
        "SELECT pgrag.recount_language_sums(active_set_id) FROM pgrag.collections WHERE id = %s",
        (collection_id,),
    )
