"""What the document context costs ingestion, end to end (`ingest.py --context-compare`):
`pgrag ingest` of one knowledge base with the context (PGRAG_CHUNK_CONTEXT_TOKENS,
`--context-tokens`) and without it (0), each run into a fresh database (no embedding cache),
the order alternating from pass to pass so that a load moving under the runs weighs on both.
Prints each run and the medians: wall time, busy time inside the model, chunks, the texts
embedded and their tokens (the model's XLM-R tokens and cl100k), and the ratios with /
without: throughput (documents per second = wall without / wall with), model time, tokens.

    python benchmarks/ingest/ingest.py --context-compare --kb generated --docs 20 [--passes 3]
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import support
from ingest_run import IngestRun, KbSource, ingest

from pgrag.embeddings.e5.engine import load_engine
from pgrag.settings import LocalEngine, default_home
from pgrag.tokens import count_tokens


@dataclass
class ContextRun:
    context_tokens: int
    wall_s: float
    embed_s: float  # busy wall seconds inside the model
    chunks: int
    texts: int  # distinct texts embedded
    xlmr_tokens: int
    cl100k_tokens: int


def _measured(tokens: int, run: IngestRun) -> ContextRun:
    if run.exit_code != 0:
        raise SystemExit(f"pgrag ingest failed (context {tokens}):\n{run.log_tail}")
    engine = load_engine(default_home(), LocalEngine.ONNX, 1)  # its tokenizer
    return ContextRun(
        context_tokens=tokens,
        wall_s=round(run.wall_s, 2),
        embed_s=round(run.stats.get("stages", {}).get("embed", {}).get("busy_s", 0.0), 2),
        chunks=run.counts.get("chunks", 0),
        texts=len(run.texts),
        xlmr_tokens=sum(engine.token_count(t) for t in run.texts),
        cl100k_tokens=sum(count_tokens(t) for t in run.texts),
    )


def _line(r: ContextRun) -> str:
    return (
        f"context {r.context_tokens:>3}: wall {r.wall_s:8.1f} s, model {r.embed_s:8.1f} s,"
        f" {r.chunks} chunks, {r.texts} texts, {r.xlmr_tokens:,} XLM-R / "
        f"{r.cl100k_tokens:,} cl100k tokens"
    )


def compare(
    kb: KbSource, admin: str, args: argparse.Namespace, env: dict[str, str], work: Path
) -> dict[str, Any]:
    """Alternating passes with and without the context; medians and ratios."""
    runs: dict[int, list[ContextRun]] = {args.context_tokens: [], 0: []}
    order = [args.context_tokens, 0]
    for n in range(args.passes):
        for tokens in order if n % 2 == 0 else order[::-1]:
            dsn = support.fresh_database(admin, f"pgrag_bench_context_{tokens}")
            try:
                child = {**env, "PGRAG_CHUNK_CONTEXT_TOKENS": str(tokens)}
                run = _measured(tokens, ingest(kb, dsn, args.model, child, work))
            finally:
                support.drop_database(admin, dsn)
            runs[tokens].append(run)
            print(f"[{kb.name}] pass {n + 1} {_line(run)}", flush=True)
    with_, without = runs[args.context_tokens], runs[0]

    def median(rs: list[ContextRun], field: str) -> float:
        return float(statistics.median(getattr(r, field) for r in rs))

    ratios = {
        "throughput": median(without, "wall_s") / median(with_, "wall_s"),
        "model_time": median(with_, "embed_s") / max(median(without, "embed_s"), 1e-9),
        "xlmr_tokens": with_[0].xlmr_tokens / max(without[0].xlmr_tokens, 1),
        "chunks": with_[0].chunks / max(without[0].chunks, 1),
    }
    print(
        f"[{kb.name}] with / without the context ({args.passes} passes, medians):"
        f" throughput {ratios['throughput']:.3f} (wall {median(with_, 'wall_s'):.1f} s /"
        f" {median(without, 'wall_s'):.1f} s); model time {ratios['model_time']:.3f};"
        f" XLM-R tokens {ratios['xlmr_tokens']:.3f}; chunks {ratios['chunks']:.3f}",
        flush=True,
    )
    return {
        "kb": kb.note,
        "passes": args.passes,
        "runs": {str(k): [asdict(r) for r in v] for k, v in runs.items()},
        "ratios_with_over_without": {k: round(v, 4) for k, v in ratios.items()},
    }
