"""A deterministic, instant embedder (`hash/<dims>`) for volume tests and pipeline benchmarks.

Vectors come from hashed word features, so equal texts get equal vectors and texts sharing
words are closer; there is no semantics. Never the default.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from pgrag.embeddings.base import EmbeddingProvider, normalise

_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder(EmbeddingProvider):
    def __init__(self, model: str = "hash/384", batch_size: int = 256) -> None:
        self.model = model
        self.batch_size = batch_size
        self._dims = int(model.split("/", 1)[1])

    @property
    def dimensions(self) -> int:
        return self._dims

    def _vector(self, text: str) -> np.ndarray:
        v = np.zeros(self._dims, dtype=np.float32)
        for word in _WORD.findall(text.lower()) or [text]:
            h = hashlib.blake2b(word.encode(), digest_size=8).digest()
            idx = int.from_bytes(h[:4], "little") % self._dims
            v[idx] += 1.0 if h[4] & 1 else -1.0
        return v

    async def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        return normalise(np.stack([self._vector(t) for t in texts]))
