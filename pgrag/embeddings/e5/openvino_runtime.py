"""The encoder graph on OpenVINO (the `pgrag[fast]` extra): the same cached 4-bit graph
file ONNX Runtime reads, computed in f32 with activations quantized to int8 per 32-block,
the blocks of the 4-bit weights. That is the change the query graph's `accuracy_level=4`
already makes (vectors within cosine 0.9999 of ONNX Runtime's, tests/test_encoder_openvino.py),
and the first that gets past this hardware's fp32 rate: VNNI int8 dot products.

OpenVINO's own default precision is bf16 on CPUs that have it: without AMX that was 20 %
slower than f32 and moves the vectors, so f32 is set explicitly. Its compiled models are
cached beside the graph (start-up 1.4 s -> 1.0 s). Telemetry is turned off before import."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from pgrag.embeddings.e5.runtime import release_free_heap

log = logging.getLogger("pgrag.embeddings")
# Every new input length makes OpenVINO build (and keep) kernels for it: ~1 MB each, so
# long queries of varying lengths (anyone can send them) grew a server by ~95 MB per 60.
# Runs are padded to one of these lengths (padding is masked: the same vectors).
SEQ_BUCKETS = (8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 448, 512)
PRECISION = {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "32"}

_core_lock = threading.Lock()
_core: Any = None


def openvino_core() -> Any:
    """One OpenVINO Core per process; raises where the package is missing or broken."""
    global _core
    with _core_lock:
        if _core is None:
            os.environ["OPENVINO_TELEMETRY_DISABLE"] = "1"
            import openvino

            _core = openvino.Core()
        return _core


class OpenVinoRunner:
    """One compiled model and a pool of its infer requests. A request is not thread-safe:
    each run takes one (waiting while all are busy). The model runs `parallel` streams of
    `threads` threads, so `parallel` callers compute at once and no more threads exist
    than pgrag's executors expect. Memory is released only while no request runs
    (OpenVINO refuses otherwise): by the call that asks, or by the last run to end. Runs
    are padded to SEQ_BUCKETS lengths."""

    def __init__(
        self,
        graph: Path,
        cache: Path,
        threads: int,
        parallel: int = 1,
        precision: dict[str, str] = PRECISION,  # benchmarks/ingest/encoder.py compares others
    ) -> None:
        config = {
            **precision,
            "CACHE_DIR": str(cache),
            "NUM_STREAMS": str(parallel),
            "INFERENCE_NUM_THREADS": str(threads * parallel),
            # pgrag's executors and the other engines share the cores: no pinning
            "ENABLE_CPU_PINNING": False,
        }
        # compiled from the file's path, so a cached model skips reading the graph too
        self._compiled = openvino_core().compile_model(str(graph), "CPU", config)
        self._free = [self._compiled.create_infer_request() for _ in range(parallel)]
        self._busy = 0
        self._release_pending = False
        self._cond = threading.Condition()

    def hidden(self, emb: np.ndarray, mask: np.ndarray, shrink: bool) -> np.ndarray:
        seq = emb.shape[1]
        emb, mask = pad_to_bucket(emb, mask)
        return self._infer(emb, mask)[:, :seq]

    def _infer(self, emb: np.ndarray, mask: np.ndarray) -> np.ndarray:
        with self._cond:
            while not self._free:
                self._cond.wait()
            request = self._free.pop()
            self._busy += 1
        try:
            # inputs are read in place; the output is copied out of the request
            out = request.infer({"embeddings": emb, "mask": mask}, share_inputs=True)
            hidden: np.ndarray = out["hidden"]
        finally:
            with self._cond:
                self._free.append(request)
                self._busy -= 1
                self._release_if_idle()
                self._cond.notify()
        return hidden

    def release(self) -> None:
        with self._cond:
            self._release_pending = True
            self._release_if_idle()

    def _release_if_idle(self) -> None:
        """Under the condition's lock: no request can start while memory is released."""
        if self._release_pending and self._busy == 0:
            self._release_pending = False
            try:
                self._compiled.release_memory()
            except Exception as e:  # memory kept is no reason to fail an embedding
                log.debug("OpenVINO release_memory: %s", e)
            release_free_heap()


def pad_to_bucket(emb: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`emb` [batch, seq, hidden] and `mask` [batch, seq] padded (masked out) to the
    smallest bucket length >= seq; longer runs unchanged."""
    seq = emb.shape[1]
    target = next((b for b in SEQ_BUCKETS if b >= seq), seq)
    if target == seq:
        return emb, mask
    pad = target - seq
    return (
        np.pad(emb, ((0, 0), (0, pad), (0, 0))),
        np.pad(mask, ((0, 0), (0, pad))),
    )
