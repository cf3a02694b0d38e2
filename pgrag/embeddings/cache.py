"""Passage embeddings cached in Postgres by (model, sha256 of the text). Vectors travel in
binary both ways: the text form costs a float conversion per dimension in Python."""

from __future__ import annotations

import hashlib

import numpy as np
import psycopg

from pgrag.embeddings.base import EmbeddingProvider

GET_SQL = """
SELECT content_hash, embedding FROM pgrag.embedding_cache
WHERE model = %s AND content_hash = ANY(%s)
"""
PUT_SQL = """
INSERT INTO pgrag.embedding_cache (model, content_hash, embedding)
SELECT %s, h, e FROM unnest(%s::bytea[], %b::vector[]) AS t(h, e)
ON CONFLICT DO NOTHING
"""


def content_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def cache_key(provider: EmbeddingProvider) -> str:
    return f"{provider.model}@{provider.dimensions}"


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


async def embed_passages_cached(
    conn: psycopg.AsyncConnection, provider: EmbeddingProvider, texts: list[str]
) -> tuple[np.ndarray, int]:
    """Embed texts, reusing cached vectors; returns (vectors, how many were computed)."""
    if not texts:
        return np.zeros((0, provider.dimensions), dtype=np.float32), 0
    key = cache_key(provider)
    hashes = [content_hash(t) for t in texts]
    known = await lookup(conn, key, list(set(hashes)))
    missing: dict[bytes, str] = {}
    for h, t in zip(hashes, texts, strict=True):
        if h not in known and h not in missing:
            missing[h] = t
    if missing:
        vectors = await provider.embed_passages(list(missing.values()))
        fresh = dict(zip(missing, vectors, strict=True))
        await store(conn, key, fresh)
        known.update(fresh)
    return np.stack([known[h] for h in hashes]), len(missing)
