"""The vectors of many documents in one transaction: store/vectors.write_vectors for a
round of small documents (a table source's rows: one or two chunks each), in a fixed number
of statements instead of ~8 per document. Same rules: only chunks that still exist, each
document's earlier vectors out and back in with the new ones (one document, one mean in the
per-language sums), `vectors_pending` recounted; a document deleted meanwhile is None.
"""

from __future__ import annotations

from uuid import UUID

import numpy as np
import psycopg

from pgrag.store.vectors import SET_PENDING_SQL, _packed

LOCK_SQL = """
SELECT id FROM pgrag.documents WHERE collection_id = %s AND id = ANY(%s::uuid[]) ORDER BY id
FOR UPDATE
"""
ACTIVE_SET_SQL = "SELECT active_set_id FROM pgrag.collections WHERE id = %s"
LIVE_SQL = """
SELECT id, lang, document_id FROM pgrag.chunks
WHERE collection_id = %s AND document_id = ANY(%s::uuid[]) AND id = ANY(%s::bigint[])
"""
SUMS_SQL = "SELECT pgrag.write_language_sums(%s, d, %s) FROM unnest(%s::uuid[]) d"
TAKE_OUT_SQL = """
DELETE FROM pgrag.embeddings
WHERE collection_id = %s AND set_id = %s AND document_id = ANY(%s::uuid[])
RETURNING chunk_id, embedding, lang, document_id
"""
# %b: the vectors in binary (store/vectors)
INSERT_SQL = """
INSERT INTO pgrag.embeddings (collection_id, set_id, chunk_id, embedding, lang, document_id)
SELECT %s, %s, chunk_id, embedding, coalesce(lang, 'und'), document_id
FROM unnest(%s::bigint[], %b::vector[], %s::text[], %s::uuid[])
     AS e(chunk_id, embedding, lang, document_id)
"""
MISSING_SQL = """
SELECT c.document_id, count(*) FROM pgrag.chunks c
WHERE c.collection_id = %s AND c.document_id = ANY(%s::uuid[])
  AND NOT EXISTS (SELECT 1 FROM pgrag.embeddings e  -- collection_id: Citus's shard key
                  WHERE e.collection_id = c.collection_id AND e.set_id = %s
                    AND e.chunk_id = c.id)
GROUP BY c.document_id
"""

Row = tuple[int, np.ndarray, str | None, UUID]  # chunk, vector, language, document


async def _replace(
    conn: psycopg.AsyncConnection, ids: tuple[int, int], docs: list[UUID], new: list[Row]
) -> None:
    """The documents' vectors out and back in with the new ones, in two statements."""
    collection_id, set_id = ids
    await conn.execute(SUMS_SQL, (collection_id, -1, docs))
    async with conn.cursor(binary=True) as cur:
        await cur.execute(TAKE_OUT_SQL, (collection_id, set_id, docs))
        old = await cur.fetchall()
    rows: dict[int, Row] = {
        cid: (cid, np.asarray(v.to_numpy(), dtype=np.float32), lang, doc)
        for cid, v, lang, doc in old
    }
    rows.update({r[0]: r for r in new})
    packed = await _packed(conn, [r[1] for r in rows.values()])
    await conn.execute(
        INSERT_SQL,
        (
            collection_id,
            set_id,
            list(rows),
            packed,
            [r[2] for r in rows.values()],
            [r[3] for r in rows.values()],
        ),
    )
    await conn.execute(SUMS_SQL, (collection_id, 1, docs))


async def write_vectors_many(
    conn: psycopg.AsyncConnection,
    ids: tuple[int, int],
    vectors: dict[UUID, dict[int, np.ndarray]],
) -> dict[UUID, int | None]:
    """Add these documents' computed vectors (by document, then chunk id) in one
    transaction (ids: collection, set); per document the chunks still without a vector
    after it (None: the document is gone)."""
    collection_id, set_id = ids
    async with conn.transaction():
        cur = await conn.execute(LOCK_SQL, (collection_id, list(vectors)))
        alive = [r[0] for r in await cur.fetchall()]
        if not alive:
            return dict.fromkeys(vectors)
        row = await (await conn.execute(ACTIVE_SET_SQL, (collection_id,))).fetchone()
        active = row[0] if row is not None else None
        if active == set_id:
            chunk_ids = [c for d in alive for c in vectors[d]]
            cur = await conn.execute(LIVE_SQL, (collection_id, alive, chunk_ids))
            live = [(cid, vectors[doc][cid], lang, doc) for cid, lang, doc in await cur.fetchall()]
            if live:
                await _replace(conn, (collection_id, set_id), sorted({r[3] for r in live}), live)
        cur = await conn.execute(MISSING_SQL, (collection_id, alive, active))
        missing = {doc: int(n) for doc, n in await cur.fetchall()}
        async with conn.cursor() as pending_cur:
            await pending_cur.executemany(
                SET_PENDING_SQL,
                [{"pending": missing.get(d, 0), "cid": collection_id, "doc": d} for d in alive],
            )
    found: dict[UUID, int | None] = dict.fromkeys(vectors)
    found.update({d: missing.get(d, 0) for d in alive})
    return found
