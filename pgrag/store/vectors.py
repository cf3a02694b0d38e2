"""A document's vectors after its chunks: the second phase of writing a version, and what a
run finds still missing.

A version's chunks commit first with the vectors already known (store/documents); the
others are written here, all of a document's at once, in one short transaction that also
recounts `documents.vectors_pending`. Vectors go over the wire as one binary `vector[]`
packed by numpy in a worker thread: pgvector's text form costs ~2.7 ms of event-loop time
per 384-dimension vector (a 50 MB file: minutes of a frozen server), its binary dumper
~30 us (still a second for 35,000 chunks); packed, the loop only copies one buffer.

The per-language sums (migration 0016) hold, per set and language, the sum of each
document's mean vector, added by one statement per document. So that a document written in
two phases counts once, with the mean of all its vectors, this write takes the document's
earlier vectors out (one DELETE: minus its old mean) and puts them back with the new ones
(one INSERT: plus the whole mean); on Citus, where the writer keeps the sums, the same with
pgrag.write_language_sums around it.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

import numpy as np
import psycopg
from psycopg.adapt import Buffer, Dumper
from psycopg.pq import Format

# the per-language vector sums (sql/functions/30_semantic.sql; a no-op where triggers keep them)
LANGUAGE_SUMS_SQL = "SELECT pgrag.write_language_sums(%s, %s, %s)"

# %b: the vectors in binary
INSERT_SQL = """
INSERT INTO pgrag.embeddings (collection_id, set_id, chunk_id, embedding, lang, document_id)
SELECT %s, %s, chunk_id, embedding, coalesce(lang, 'und'), %s
FROM unnest(%s::bigint[], %b::vector[], %s::text[]) AS e(chunk_id, embedding, lang)
"""

LOCK_SQL = "SELECT id FROM pgrag.documents WHERE collection_id = %s AND id = %s FOR UPDATE"
# No lock on the collection row (a version's write takes key share): on Citus that lock on
# a reference table deadlocks with a version written at the same time. None is needed: a
# reindex switch fills every chunk into the new set and zeroes vectors_pending (waiting for
# this document's row lock), so these vectors land in the set read here, or in a retired
# one no search uses.
ACTIVE_SET_SQL = "SELECT active_set_id FROM pgrag.collections WHERE id = %s"
# the chunks still there: a newer version may have replaced them meanwhile
LIVE_SQL = """
SELECT id, lang FROM pgrag.chunks
WHERE collection_id = %s AND document_id = %s AND id = ANY(%s)
"""
TAKE_OUT_SQL = """
DELETE FROM pgrag.embeddings
WHERE collection_id = %s AND set_id = %s AND document_id = %s
RETURNING chunk_id, embedding, lang
"""
MISSING_COUNT_SQL = """
SELECT count(*) FROM pgrag.chunks c
WHERE c.collection_id = %(cid)s AND c.document_id = %(doc)s
  AND NOT EXISTS (SELECT 1 FROM pgrag.embeddings e  -- collection_id: Citus's shard key
                  WHERE e.collection_id = c.collection_id AND e.set_id = %(sid)s
                    AND e.chunk_id = c.id)
"""
# the reason a document still waits (the provider was down) goes once its vectors are in
SET_PENDING_SQL = """
UPDATE pgrag.documents
   SET vectors_pending = %(pending)s,
       error_code = CASE WHEN %(pending)s = 0 AND status = 'ready' THEN NULL ELSE error_code END,
       error_detail = CASE WHEN %(pending)s = 0 AND status = 'ready' THEN NULL
                           ELSE error_detail END
 WHERE collection_id = %(cid)s AND id = %(doc)s
"""
WAITING_REASON_SQL = """
UPDATE pgrag.documents SET error_code = %s, error_detail = %s
WHERE collection_id = %s AND id = %s AND vectors_pending > 0 AND status = 'ready'
"""

# what a run resumes: documents whose vectors an earlier run did not finish, and their chunks
WAITING_SQL = """
SELECT id, path FROM pgrag.documents
WHERE collection_id = %s AND vectors_pending > 0 AND status = 'ready'
ORDER BY path
"""
MISSING_SQL = """
SELECT c.id, c.heading, c.context, c.content, c.token_count FROM pgrag.chunks c
WHERE c.collection_id = %(cid)s AND c.document_id = %(doc)s
  AND NOT EXISTS (SELECT 1 FROM pgrag.embeddings e
                  WHERE e.collection_id = c.collection_id AND e.set_id = %(sid)s
                    AND e.chunk_id = c.id)
ORDER BY c.ordinal
"""


# two statements, not one correlated query: on Citus, documents are distributed and
# collections a reference table
WAITING_COLLECTIONS_SQL = (
    "SELECT DISTINCT collection_id FROM pgrag.documents WHERE vectors_pending > 0"
)
COLLECTIONS_OF_MODEL_SQL = """
SELECT col.name FROM pgrag.collections col JOIN pgrag.embedding_sets es ON es.id = col.active_set_id
WHERE col.id = ANY(%s) AND es.model = %s ORDER BY col.name
"""


@dataclass(frozen=True)
class MissingChunk:
    id: int
    heading: str | None
    context: str | None
    content: str
    token_count: int


@dataclass(frozen=True)
class WaitingDocument:
    id: UUID
    path: str


@dataclass(frozen=True)
class PackedVectors:
    """A `vector[]` already in PostgreSQL's binary array form."""

    data: bytes


class _PackedDumper(Dumper):
    format = Format.BINARY

    def dump(self, obj: PackedVectors) -> Buffer:
        return obj.data


def pack_vectors(vectors: Sequence[np.ndarray], element_oid: int) -> PackedVectors:
    """The binary array: header, then per element its length and pgvector's binary form
    (int16 dimensions, int16 unused, big-endian float4s). Vectors of several sizes (a
    provider that changed) are sent as they are, for the set's index to refuse."""
    header = struct.pack(">iiIii", 1, 0, element_oid, len(vectors), 1)
    if len({len(v) for v in vectors}) > 1:
        return PackedVectors(header + b"".join(map(_element, vectors)))
    m = np.ascontiguousarray(np.stack(vectors), dtype=">f4")
    n, dim = m.shape
    rows = np.empty((n, 8 + 4 * dim), dtype=np.uint8)
    rows[:, :8] = np.frombuffer(struct.pack(">ihh", 4 + 4 * dim, dim, 0), dtype=np.uint8)
    rows[:, 8:] = m.view(np.uint8).reshape(n, 4 * dim)
    return PackedVectors(header + rows.tobytes())


def _element(v: np.ndarray) -> bytes:
    return struct.pack(">ihh", 4 + 4 * len(v), len(v), 0) + np.asarray(v, dtype=">f4").tobytes()


async def _packed(conn: psycopg.AsyncConnection, vectors: Sequence[np.ndarray]) -> PackedVectors:
    info = conn.adapters.types.get("vector")  # registered by pgvector on every pooled connection
    if info is None or not info.array_oid:
        raise psycopg.ProgrammingError("the vector type is not registered on this connection")
    dumper = type("VectorArrayDumper", (_PackedDumper,), {"oid": info.array_oid})
    conn.adapters.register_dumper(PackedVectors, dumper)
    return await asyncio.to_thread(pack_vectors, vectors, info.oid)


async def insert_vectors(
    conn: psycopg.AsyncConnection,
    ids: tuple[int, int, UUID],
    chunk_ids: Sequence[int],
    vectors: Sequence[np.ndarray],
    langs: Sequence[str | None],
) -> None:
    """One statement for a document's vectors (ids: collection, set, document)."""
    collection_id, set_id, document_id = ids
    packed = await _packed(conn, vectors)
    await conn.execute(
        INSERT_SQL, (collection_id, set_id, document_id, list(chunk_ids), packed, list(langs))
    )


async def _scalar(
    conn: psycopg.AsyncConnection, query: str, params: Sequence[object] | Mapping[str, object]
) -> int:
    row = await (await conn.execute(query, params)).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


async def write_vectors(
    conn: psycopg.AsyncConnection,
    ids: tuple[int, int, UUID],
    vectors: dict[int, np.ndarray],
) -> int | None:
    """Add a document's computed vectors (by chunk id) for its chunks that still exist, in
    one transaction; the chunks still without a vector after it (None: the document is
    gone). A reindex that switched sets before has embedded every chunk already: the
    vectors are dropped and the count taken against the new set."""
    collection_id, set_id, document_id = ids
    async with conn.transaction():
        if await (await conn.execute(LOCK_SQL, (collection_id, document_id))).fetchone() is None:
            return None
        active = await _scalar(conn, ACTIVE_SET_SQL, (collection_id,))
        if active == set_id:
            live = await (
                await conn.execute(LIVE_SQL, (collection_id, document_id, list(vectors)))
            ).fetchall()
            if live:
                await _replace(conn, ids, {cid: (vectors[cid], lang) for cid, lang in live})
        pending = await _scalar(
            conn, MISSING_COUNT_SQL, {"cid": collection_id, "doc": document_id, "sid": active}
        )
        await conn.execute(
            SET_PENDING_SQL, {"pending": pending, "cid": collection_id, "doc": document_id}
        )
    return pending


async def _replace(
    conn: psycopg.AsyncConnection,
    ids: tuple[int, int, UUID],
    new: dict[int, tuple[np.ndarray, str | None]],
) -> None:
    """The document's vectors out and back in with the new ones: one document, one mean,
    in the per-language sums (see the module docstring)."""
    collection_id, _, document_id = ids
    await conn.execute(LANGUAGE_SUMS_SQL, (collection_id, document_id, -1))
    async with conn.cursor(binary=True) as cur:
        await cur.execute(TAKE_OUT_SQL, (collection_id, ids[1], document_id))
        old = await cur.fetchall()
    rows = {cid: (np.asarray(v.to_numpy(), dtype=np.float32), lang) for cid, v, lang in old}
    rows.update(new)
    await insert_vectors(
        conn, ids, list(rows), [v for v, _ in rows.values()], [lang for _, lang in rows.values()]
    )
    await conn.execute(LANGUAGE_SUMS_SQL, (collection_id, document_id, 1))


async def mark_waiting(
    conn: psycopg.AsyncConnection, collection_id: int, document_id: UUID, code: str, detail: str
) -> None:
    """Why a document's vectors are still missing (e.g. the provider is down)."""
    await conn.execute(WAITING_REASON_SQL, (code, detail, collection_id, document_id))


async def waiting_documents(
    conn: psycopg.AsyncConnection, collection_id: int
) -> list[WaitingDocument]:
    rows = await (await conn.execute(WAITING_SQL, (collection_id,))).fetchall()
    return [WaitingDocument(r[0], r[1]) for r in rows]


async def collections_waiting(conn: psycopg.AsyncConnection, model: str) -> list[str]:
    """The collections embedded with `model` that have documents waiting for vectors."""
    ids = [r[0] for r in await (await conn.execute(WAITING_COLLECTIONS_SQL)).fetchall()]
    if not ids:
        return []
    rows = await (await conn.execute(COLLECTIONS_OF_MODEL_SQL, (ids, model))).fetchall()
    return [r[0] for r in rows]


async def missing_chunks(
    conn: psycopg.AsyncConnection, collection_id: int, set_id: int, document_id: UUID
) -> list[MissingChunk]:
    """The document's chunks without a vector in the set, in order."""
    rows = await (
        await conn.execute(MISSING_SQL, {"cid": collection_id, "doc": document_id, "sid": set_id})
    ).fetchall()
    return [MissingChunk(*r) for r in rows]
