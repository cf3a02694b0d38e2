"""Writing many small documents in one transaction: the rows of a table source.

store/documents writes one version per transaction in ~15 statements; a table's rows are
small documents by the thousand, so a drain batch writes all of its versions in the
caller's transaction in a fixed number of statements (arrays unnested server-side): the
replaced chunks and units out, the documents upserted `ready` (their key and source with
them), the units, chunks and the vectors the cache knows in. Keyword-searchable at commit;
the chunks still without a vector are counted in `vectors_pending` and returned for the
vector stage. Rows that cannot become a document are upserted `failed` with their code.
The BM25 and language sums, graph links and change notifications are kept as
store/documents keeps them (no-ops on a single server, the writer's calls on Citus).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from pgrag.language import detect_language
from pgrag.store.changes import announce
from pgrag.store.documents import (
    ChunkRow,
    DocumentFields,
    EmbeddingSetChanged,
    UnitIn,
    _chunk_params,
)
from pgrag.store.reindex import ACTIVE_SET_SQL, WRITER_LOCK_SQL
from pgrag.store.vectors import _packed

FORGET_SUMS_SQL = """
SELECT pgrag.write_language_sums(%(cid)s, d, -1), pgrag.write_bm25_sums(%(cid)s, d, -1)
FROM unnest(%(ids)s::uuid[]) d
"""
ADD_BM25_SQL = "SELECT pgrag.write_bm25_sums(%s, d, 1) FROM unnest(%s::uuid[]) d"
ADD_LANGUAGE_SQL = "SELECT pgrag.write_language_sums(%s, d, 1) FROM unnest(%s::uuid[]) d"
UNLINK_SQL = "SELECT pgrag.unlink_graph(%s, %s::uuid[], false)"
DELETE_CHUNKS_SQL = "DELETE FROM pgrag.chunks WHERE collection_id = %s AND document_id = ANY(%s)"
DELETE_UNITS_SQL = "DELETE FROM pgrag.units WHERE collection_id = %s AND document_id = ANY(%s)"
LOCK_SQL = """
SELECT id FROM pgrag.documents WHERE collection_id = %s AND id = ANY(%s::uuid[]) ORDER BY id
FOR UPDATE
"""

# ingested_at / updated_at through EXCLUDED: Citus refuses now() in ON CONFLICT's SET
UPSERT_SQL = """
INSERT INTO pgrag.documents (collection_id, path, folder, name, file_type, size_bytes,
                             content_hash, title, outline, metadata, status, progress,
                             error_code, error_detail, vectors_pending, ingested_at,
                             updated_at, source, table_source_id, source_key)
SELECT %(cid)s, d.path, d.folder, d.name, d.file_type, d.size_bytes, d.content_hash, d.title,
       d.outline, d.metadata, d.status, CASE WHEN d.status = 'ready' THEN 100 ELSE 0 END,
       d.error_code, d.error_detail, d.pending, now(), now(), 'table', %(sid)s, d.source_key
FROM unnest(%(path)s::text[], %(folder)s::text[], %(name)s::text[], %(file_type)s::text[],
            %(size)s::bigint[], %(hash)s::text[], %(title)s::text[], %(outline)s::jsonb[],
            %(metadata)s::jsonb[], %(status)s::text[], %(code)s::text[], %(detail)s::text[],
            %(pending)s::int[], %(key)s::jsonb[])
     AS d(path, folder, name, file_type, size_bytes, content_hash, title, outline, metadata,
          status, error_code, error_detail, pending, source_key)
ON CONFLICT (collection_id, path) DO UPDATE
   SET folder = EXCLUDED.folder, name = EXCLUDED.name, file_type = EXCLUDED.file_type,
       size_bytes = EXCLUDED.size_bytes, content_hash = EXCLUDED.content_hash,
       title = EXCLUDED.title, author = NULL, created_at = NULL, modified_at = NULL,
       outline = EXCLUDED.outline, metadata = EXCLUDED.metadata, status = EXCLUDED.status,
       progress = EXCLUDED.progress, error_code = EXCLUDED.error_code,
       error_detail = EXCLUDED.error_detail, vectors_pending = EXCLUDED.vectors_pending,
       ingested_at = EXCLUDED.ingested_at, updated_at = EXCLUDED.updated_at,
       source = EXCLUDED.source, table_source_id = EXCLUDED.table_source_id,
       source_key = EXCLUDED.source_key
RETURNING id, path
"""

UNITS_SQL = """
INSERT INTO pgrag.units (collection_id, document_id, kind, number, title, body, meta)
SELECT %s, document_id, kind, number, title, body, meta
FROM unnest(%s::uuid[], %s::text[], %s::int[], %s::text[], %s::text[], %s::jsonb[])
     AS u(document_id, kind, number, title, body, meta)
RETURNING id, document_id, kind, number
"""

CHUNKS_SQL = """
INSERT INTO pgrag.chunks (document_id, collection_id, unit_id, ordinal, heading, content,
                          content_hash, token_count, char_start, char_end, page, section,
                          sheet, row_start, row_end, slide, lang, context)
SELECT document_id, %s, unit_id, ordinal, heading, content, content_hash, token_count,
       char_start, char_end, page, section, sheet, row_start, row_end, slide, lang, context
FROM unnest(%s::uuid[], %s::bigint[], %s::int[], %s::text[], %s::text[], %s::bytea[],
            %s::int[], %s::int[], %s::int[], %s::int[], %s::text[], %s::text[], %s::int[],
            %s::int[], %s::int[], %s::text[], %s::text[])
     AS c(document_id, unit_id, ordinal, heading, content, content_hash, token_count,
          char_start, char_end, page, section, sheet, row_start, row_end, slide, lang, context)
ORDER BY document_id, ordinal
RETURNING id, document_id, ordinal
"""

# %b: the vectors in binary (store/vectors)
VECTORS_SQL = """
INSERT INTO pgrag.embeddings (collection_id, set_id, chunk_id, embedding, lang, document_id)
SELECT %s, %s, chunk_id, embedding, coalesce(lang, 'und'), document_id
FROM unnest(%s::bigint[], %b::vector[], %s::text[], %s::uuid[])
     AS e(chunk_id, embedding, lang, document_id)
"""

METADATA_SQL = """
UPDATE pgrag.documents SET metadata = %s, updated_at = now() WHERE collection_id = %s AND id = %s
"""


@dataclass
class BatchVersion:
    """One document of a batch: its fields, units and chunks (vectors: each chunk's from
    the embedding cache, or None), or a failure (code, detail) instead of a version."""

    fields: DocumentFields
    key: dict[str, Any]
    units: Sequence[UnitIn] = ()
    chunks: list[ChunkRow] = field(default_factory=list)
    vectors: list[np.ndarray | None] = field(default_factory=list)
    failure: tuple[str, str] | None = None


@dataclass(frozen=True)
class Written:
    """A written document: its id and its chunks' ids, in order."""

    document_id: UUID
    chunk_ids: list[int]


def _languages(versions: list[BatchVersion]) -> list[list[str]]:
    return [[detect_language(c.draft.content) for c in v.chunks] for v in versions]


def _document_params(versions: list[BatchVersion]) -> dict[str, Any]:
    f = [v.fields for v in versions]
    return {
        "path": [x.path for x in f],
        "folder": [x.folder for x in f],
        "name": [x.name for x in f],
        "file_type": [x.file_type for x in f],
        "size": [x.size_bytes for x in f],
        "hash": [x.content_hash or None for x in f],
        "title": [x.title for x in f],
        "outline": [Jsonb(x.outline) for x in f],
        "metadata": [Jsonb(x.metadata) for x in f],
        "status": ["failed" if v.failure else "ready" for v in versions],
        "code": [v.failure[0] if v.failure else None for v in versions],
        "detail": [v.failure[1] if v.failure else None for v in versions],
        "pending": [sum(1 for x in v.vectors if x is None) for v in versions],
        "key": [Jsonb(v.key) for v in versions],
    }


async def _clear(conn: psycopg.AsyncConnection, collection_id: int, ids: list[UUID]) -> None:
    """The replaced documents' chunks and units out (their sums first, their graph links
    unset): what write_version does for one document."""
    if not ids:
        return
    await conn.execute(LOCK_SQL, (collection_id, ids))
    await conn.execute(FORGET_SUMS_SQL, {"cid": collection_id, "ids": ids})
    await conn.execute(UNLINK_SQL, (collection_id, ids))
    await conn.execute(DELETE_CHUNKS_SQL, (collection_id, ids))
    await conn.execute(DELETE_UNITS_SQL, (collection_id, ids))


async def _units(
    conn: psycopg.AsyncConnection, collection_id: int, docs: list[tuple[UUID, BatchVersion]]
) -> dict[tuple[UUID, int], int]:
    """Insert the units (a row's sections: no sheet rows); their ids by (document, index)."""
    rows = [(d, i, u) for d, v in docs for i, u in enumerate(v.units)]
    if not rows:
        return {}
    cur = await conn.execute(
        UNITS_SQL,
        (
            collection_id,
            [d for d, _, _ in rows],
            [u.kind for _, _, u in rows],
            [u.number for _, _, u in rows],
            [u.title for _, _, u in rows],
            [u.body for _, _, u in rows],
            [Jsonb(u.meta) for _, _, u in rows],
        ),
    )
    by_key = {(doc, kind, number): uid for uid, doc, kind, number in await cur.fetchall()}
    return {(d, i): by_key[(d, u.kind, u.number)] for d, i, u in rows}


async def _chunks(
    conn: psycopg.AsyncConnection,
    collection_id: int,
    docs: list[tuple[UUID, BatchVersion, list[str]]],
    unit_ids: dict[tuple[UUID, int], int],
) -> dict[UUID, list[int]]:
    """Insert every document's chunks in one statement; each document's chunk ids."""
    columns: list[list[Any]] = [[] for _ in range(17)]
    for doc_id, v, langs in docs:
        units = [unit_ids[(doc_id, c.unit_index)] for c in v.chunks]
        params = _chunk_params((doc_id, collection_id), units, v.chunks, langs)
        columns[0].extend([doc_id] * len(v.chunks))
        for column, values in zip(columns[1:], params[2:], strict=True):
            column.extend(values)
    if not columns[0]:
        return {}
    cur = await conn.execute(CHUNKS_SQL, (collection_id, *columns))
    by_doc: dict[UUID, dict[int, int]] = {}
    for cid, doc_id, ordinal in await cur.fetchall():
        by_doc.setdefault(doc_id, {})[ordinal] = cid
    return {d: [o[i] for i in range(1, len(o) + 1)] for d, o in by_doc.items()}


async def _known_vectors(
    conn: psycopg.AsyncConnection,
    ids: tuple[int, int],
    docs: list[tuple[UUID, BatchVersion, list[str]]],
    chunk_ids: dict[UUID, list[int]],
) -> None:
    """The vectors the embedding cache knew, all documents in one statement."""
    rows = [
        (chunk_ids[d][i], vec, langs[i], d)
        for d, v, langs in docs
        for i, vec in enumerate(v.vectors)
        if vec is not None
    ]
    if not rows:
        return
    collection_id, set_id = ids
    packed = await _packed(conn, [r[1] for r in rows if r[1] is not None])
    await conn.execute(
        VECTORS_SQL,
        (
            collection_id,
            set_id,
            [r[0] for r in rows],
            packed,
            [r[2] for r in rows],
            [r[3] for r in rows],
        ),
    )
    await conn.execute(ADD_LANGUAGE_SQL, (collection_id, sorted({r[3] for r in rows})))


async def write_versions(
    conn: psycopg.AsyncConnection,
    ids: tuple[int, int, int],
    versions: list[BatchVersion],
    replaced: list[UUID],
) -> dict[str, Written]:
    """Write these versions in the caller's open transaction (ids: collection, embedding
    set, table source); `replaced`: the existing documents among them, whose chunks go.
    Each written document by path. EmbeddingSetChanged when a reindex switched sets."""
    collection_id, set_id, source_id = ids
    if not versions:
        return {}
    langs = await asyncio.to_thread(_languages, versions)
    await conn.execute(WRITER_LOCK_SQL, (collection_id,))
    row = await (await conn.execute(ACTIVE_SET_SQL, (collection_id,))).fetchone()
    active = row[0] if row is not None else None
    if active != set_id:
        raise EmbeddingSetChanged(active)
    await _clear(conn, collection_id, replaced)
    params = {"cid": collection_id, "sid": source_id, **_document_params(versions)}
    cur = await conn.execute(UPSERT_SQL, params)
    doc_ids: dict[str, UUID] = {path: doc_id for doc_id, path in await cur.fetchall()}
    docs = [(doc_ids[v.fields.path], v, lang) for v, lang in zip(versions, langs, strict=True)]
    unit_ids = await _units(conn, collection_id, [(d, v) for d, v, _ in docs])
    chunk_ids = await _chunks(conn, collection_id, docs, unit_ids)
    with_chunks = [d for d, v, _ in docs if v.chunks]
    if with_chunks:
        await conn.execute(ADD_BM25_SQL, (collection_id, with_chunks))
    await _known_vectors(conn, (collection_id, set_id), docs, chunk_ids)
    await announce(conn, "INSERT", "UPDATE")
    return {v.fields.path: Written(d, chunk_ids.get(d, [])) for d, v, _ in docs}


async def set_metadata(
    conn: psycopg.AsyncConnection, collection_id: int, changed: list[tuple[UUID, dict[str, Any]]]
) -> None:
    """New metadata of unchanged documents, pipelined in one round trip."""
    if changed:
        async with conn.cursor() as cur:
            await cur.executemany(
                METADATA_SQL, [(Jsonb(m), collection_id, doc_id) for doc_id, m in changed]
            )
