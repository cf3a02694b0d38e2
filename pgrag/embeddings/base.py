"""The provider interface: passages and queries in, L2-normalised float32 vectors out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from pgrag.embeddings.query_cache import QueryVectorCache


@dataclass(frozen=True)
class EngineNote:
    """Which in-process engine runs the model and why (`pgrag doctor` says it);
    `fastest`: no faster engine to install."""

    reason: str
    fastest: bool


class EmbeddingProvider(ABC):
    """One embedding model. Subclasses implement `_embed`; batching lives here."""

    model: str
    batch_size: int = 32
    _queries: QueryVectorCache | None = None

    @property
    @abstractmethod
    def dimensions(self) -> int:
        """Vector size; may call the provider once to find out."""

    async def probe_dimensions(self) -> int:
        """Vector size, asking the model once when it cannot be known without (remote
        providers whose dimensions are not configured)."""
        return self.dimensions

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

    def engine_note(self) -> EngineNote | None:
        """The in-process engine, for providers that run one (the bundled model)."""
        return None

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release threads or clients."""


def normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: np.ndarray = vectors / norms
    return unit
