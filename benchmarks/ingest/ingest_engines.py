"""The bundled model's engines against each other, end to end (`ingest.py --engines`, #43):
`pgrag ingest` of one knowledge base with each engine in turn (PGRAG_EMBEDDING_ENGINE), each
run into a fresh database (no embedding cache), the order alternating from round to round so
that a load moving under the runs weighs on all. Prints each run and, per engine, the medians:
wall time, busy time inside the model, XLM-R tokens/s of the whole ingest, peak RSS of the
`pgrag ingest` process; then each engine's throughput over the baseline's (`onnx`, today's
engine; target for `openvino` >= 1.4x) and its peak RSS against the 1 GB target.

    python benchmarks/ingest/ingest.py --kb docbench --engines openvino,onnx [--rounds 3]
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

BASELINE = LocalEngine.ONNX
RSS_TARGET_MB = 1024
THROUGHPUT_TARGET = 1.4


@dataclass
class EngineRun:
    engine: str  # asked for
    ran: list[str]  # what the process loaded (the fallback chain may differ)
    wall_s: float
    embed_s: float  # busy wall seconds inside the model
    chunks: int
    texts: int  # distinct texts embedded
    xlmr_tokens: int
    tokens_per_s: float  # XLM-R tokens / wall seconds of the whole ingest
    peak_rss_mb: float
    cpu_s: float


def parse_engines(text: str) -> list[LocalEngine]:
    """`openvino,onnx` -> engines; the baseline is added when missing (ratios need it)."""
    engines = [LocalEngine(x.strip()) for x in text.split(",") if x.strip()]
    if LocalEngine.AUTO in engines:
        raise SystemExit("--engines names engines, not `auto`")
    return engines if BASELINE in engines else [*engines, BASELINE]


def _measured(engine: LocalEngine, run: IngestRun, tokens: dict[str, int]) -> EngineRun:
    if run.exit_code != 0:
        raise SystemExit(f"pgrag ingest failed (engine {engine}):\n{run.log_tail}")
    key = str(len(run.texts))
    if key not in tokens:  # the same texts for every engine: counted once
        counter = load_engine(default_home(), LocalEngine.ONNX, 1)  # its tokenizer
        tokens[key] = sum(counter.token_count(t) for t in run.texts)
    return EngineRun(
        engine=str(engine),
        ran=list(run.stats.get("engines", [])),
        wall_s=round(run.wall_s, 2),
        embed_s=round(run.stats.get("stages", {}).get("embed", {}).get("busy_s", 0.0), 2),
        chunks=run.counts.get("chunks", 0),
        texts=len(run.texts),
        xlmr_tokens=tokens[key],
        tokens_per_s=round(tokens[key] / run.wall_s, 1),
        peak_rss_mb=round(run.peak_rss_mb, 1),
        cpu_s=round(run.ingest_cpu_s, 1),
    )


def _line(r: EngineRun) -> str:
    ran = "" if r.ran == [r.engine] else f" (ran: {', '.join(r.ran) or '?'})"
    return (
        f"{r.engine:>8}{ran}: wall {r.wall_s:7.1f} s, model {r.embed_s:7.1f} s, {r.chunks} chunks,"
        f" {r.xlmr_tokens:,} XLM-R tokens, {r.tokens_per_s:,.0f} tokens/s,"
        f" peak RSS {r.peak_rss_mb:.0f} MB, CPU {r.cpu_s:.0f} s"
    )


def _summary(runs: dict[str, list[EngineRun]]) -> dict[str, Any]:
    def med(rs: list[EngineRun], field: str) -> float:
        return float(statistics.median(getattr(r, field) for r in rs))

    base = runs[str(BASELINE)]
    out: dict[str, Any] = {}
    for name, rs in runs.items():
        out[name] = {
            "wall_s": med(rs, "wall_s"),
            "embed_s": med(rs, "embed_s"),
            "tokens_per_s": med(rs, "tokens_per_s"),
            "throughput_vs_onnx": round(med(rs, "tokens_per_s") / med(base, "tokens_per_s"), 3),
            "model_time_onnx_over_this": round(
                med(base, "embed_s") / max(med(rs, "embed_s"), 1e-9), 3
            ),
            "peak_rss_mb": max(r.peak_rss_mb for r in rs),
            "peak_rss_within_1gb": max(r.peak_rss_mb for r in rs) <= RSS_TARGET_MB,
            "ran": sorted({e for r in rs for e in r.ran}),
            "chunks": sorted({r.chunks for r in rs}),
        }
    return out


def compare(
    kb: KbSource, admin: str, args: argparse.Namespace, env: dict[str, str], work: Path
) -> dict[str, Any]:
    """Rounds of one ingest per engine, the order reversed every other round; medians, ratios."""
    engines = parse_engines(args.engines)
    runs: dict[str, list[EngineRun]] = {str(e): [] for e in engines}
    tokens: dict[str, int] = {}
    for n in range(args.rounds):
        for engine in engines if n % 2 == 0 else engines[::-1]:
            dsn = support.fresh_database(admin, f"pgrag_bench_engine_{engine}")
            try:
                child = {**env, "PGRAG_EMBEDDING_ENGINE": str(engine)}
                run = _measured(engine, ingest(kb, dsn, args.model, child, work), tokens)
            finally:
                support.drop_database(admin, dsn)
            runs[str(engine)].append(run)
            print(f"[{kb.name}] round {n + 1} {_line(run)}", flush=True)
    summary = _summary(runs)
    for name, s in summary.items():
        ran = "" if s["ran"] == [name] else f" [ran: {', '.join(s['ran']) or '?'}]"
        target = f" (target >= {THROUGHPUT_TARGET}x)" if name != str(BASELINE) else ""
        print(
            f"[{kb.name}] {name}{ran} ({args.rounds} rounds, medians): {s['tokens_per_s']:,.0f}"
            f" tokens/s = {s['throughput_vs_onnx']:.3f}x onnx{target}; model time onnx/this"
            f" {s['model_time_onnx_over_this']:.3f}; peak RSS {s['peak_rss_mb']:.0f} MB"
            f" ({'within' if s['peak_rss_within_1gb'] else 'OVER'} 1 GB)",
            flush=True,
        )
    return {
        "kb": kb.note,
        "rounds": args.rounds,
        "baseline": str(BASELINE),
        "runs": {k: [asdict(r) for r in v] for k, v in runs.items()},
        "summary": summary,
    }
