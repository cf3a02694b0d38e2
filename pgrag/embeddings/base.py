"""The provider interface: passages and queries in, L2-normalised float32 vectors out."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from pgrag.embeddings.query_cache import QueryVectorCache
from pgrag.errors import PgragError


class EmbeddingProvider(ABC):
    """One embedding model. Subclasses implement `_embed`; batching lives here."""

    model: str
    batch_size: int = 32
    _queries: QueryVectorCache | None = None

    @property
    @abstractmethod
    def dimensions(self) -> int:
        """Vector size; may call the provider once to find out."""

    @abstractmethod
    async def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray: ...

    async def embed_passages(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        parts = [
            await self._embed(texts[i : i + self.batch_size], is_query=False)
            for i in range(0, len(texts), self.batch_size)
        ]
        return np.vstack(parts)

    def cache_queries(self, size: int) -> None:
        """Keep the last `size` query vectors (0 turns the cache off)."""
        self._queries = QueryVectorCache(size) if size > 0 else None

    async def embed_query(self, text: str) -> np.ndarray:
        if self._queries is None:
            return await self._embed_one_query(text)
        vector: np.ndarray = await self._queries.get(text, self._embed_one_query)
        return vector

    async def _embed_one_query(self, text: str) -> np.ndarray:
        vectors = await self._embed([text], is_query=True)
        one: np.ndarray = vectors[0]
        return one

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release threads or clients."""


def normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: np.ndarray = vectors / norms
    return unit


def dimension_mismatch(
    collection: str, stored_model: str, stored_dims: int, model: str, dims: int
) -> PgragError:
    """The error for a collection embedded by another model: names both and the fix."""
    from pgrag.errors import InvalidArgument

    return InvalidArgument(
        f"collection '{collection}' holds {stored_dims}-dimension embeddings from {stored_model}, "
        f"but the configured model {model} produces {dims}: run "
        f"`pgrag reindex --collection {collection} --model {model}` to re-embed it, "
        f"or set PGRAG_EMBEDDING_MODEL={stored_model}.",
        detail={
            "stored_model": stored_model,
            "stored_dimensions": stored_dims,
            "model": model,
            "dimensions": dims,
        },
    )
