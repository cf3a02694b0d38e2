"""Languages of chunks stored before languages were detected (migration 0016).

Detection runs in Python (pgrag.language), so `migrate` fills in what SQL could not:
chunks without a language get one, their vectors follow, and the per-language sums of the
sets touched are recounted. Batched, so a large database upgrades in bounded memory."""

from __future__ import annotations

import psycopg

from pgrag.language import detect_language

BATCH = 2000
PENDING_SQL = "SELECT id, content FROM pgrag.chunks WHERE lang IS NULL ORDER BY id LIMIT %s"
SET_CHUNKS_SQL = """
UPDATE pgrag.chunks c SET lang = v.lang
FROM unnest(%s::bigint[], %s::text[]) AS v(id, lang) WHERE c.id = v.id
"""
SET_EMBEDDINGS_SQL = """
UPDATE pgrag.embeddings e SET lang = c.lang
FROM pgrag.chunks c WHERE c.id = e.chunk_id AND c.id = ANY (%s) AND e.lang IS DISTINCT FROM c.lang
RETURNING e.set_id
"""
RECOUNT_SQL = "SELECT pgrag.recount_language_sums(%s)"


async def detect_missing_languages(conn: psycopg.AsyncConnection) -> int:
    """Give every chunk without a language one; returns how many were set."""
    done = 0
    sets: set[int] = set()
    while True:
        async with conn.transaction():
            rows = await (await conn.execute(PENDING_SQL, (BATCH,))).fetchall()
            if not rows:
                break
            ids = [r[0] for r in rows]
            await conn.execute(SET_CHUNKS_SQL, (ids, [detect_language(r[1]) for r in rows]))
            cur = await conn.execute(SET_EMBEDDINGS_SQL, (ids,))
            sets.update(r[0] for r in await cur.fetchall())
        done += len(rows)
    for set_id in sorted(sets):
        async with conn.transaction():
            await conn.execute(RECOUNT_SQL, (set_id,))
    return done
