"""The SQL of the passage-embedding cache: vectors by (model key, sha256 of the text).
Vectors travel in binary both ways: the text form costs a float conversion per dimension in
Python."""

from __future__ import annotations

import numpy as np
import psycopg

GET_SQL = """
SELECT content_hash, embedding FROM pgrag.embedding_cache
WHERE model = %s AND content_hash = ANY(%s)
"""
PUT_SQL = """
INSERT INTO pgrag.embedding_cache (model, content_hash, embedding)
SELECT %s, h, e FROM unnest(%s::bytea[], %b::vector[]) AS t(h, e)
ON CONFLICT DO NOTHING
"""


async def lookup(
    conn: psycopg.AsyncConnection, key: str, hashes: list[bytes]
) -> dict[bytes, np.ndarray]:
    async with conn.cursor(binary=True) as cur:
        await cur.execute(GET_SQL, (key, hashes))
        rows = await cur.fetchall()
    return {
        bytes(h): np.asarray(e.to_numpy() if hasattr(e, "to_numpy") else e, dtype=np.float32)
        for h, e in rows
    }


async def store(conn: psycopg.AsyncConnection, key: str, items: dict[bytes, np.ndarray]) -> None:
    if items:
        hashes = list(items)
        vectors = [np.asarray(items[h], dtype=np.float32) for h in hashes]
        await conn.execute(PUT_SQL, (key, hashes, vectors))
