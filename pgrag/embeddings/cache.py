"""Passage embeddings cached in Postgres by (model, sha256 of the text); the cache's reads
and writes (`lookup`, `store`) are pgrag/store/embedding_cache.py's."""

from __future__ import annotations

import hashlib

import numpy as np
import psycopg

from pgrag.embeddings.base import EmbeddingProvider
from pgrag.store.embedding_cache import lookup, store

__all__ = ["cache_key", "content_hash", "embed_passages_cached", "lookup", "store"]


def content_hash(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def cache_key(provider: EmbeddingProvider) -> str:
    return f"{provider.model}@{provider.dimensions}"


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
