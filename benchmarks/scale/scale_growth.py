"""Two scale.py runs side by side (labels in results/scale.json) with the ratios the targets
name: keyword and hybrid p95 at the larger size over the smaller (target <= 3x from 10^5 to
10^6), a collection-limited key over the unscoped search filtered to the same collection at
each size (<= 1.2x), pgrag's hybrid p95 over the peers' recipes' (<= 1x), and recall@10 of
the shipped semantic search (>= 0.95).

    python benchmarks/scale/scale.py --growth 100k 1m
"""

from __future__ import annotations

from typing import Any

GROWTH_LIMIT = 3.0
SCOPED_LIMIT = 1.2
RECALL_TARGET = 0.95


def report(data: dict[str, Any], small: str, large: str) -> str:
    a, b = data[small], data[large]
    head = f"| | {a['chunks']:,} chunks (`{small}`) | {b['chunks']:,} chunks (`{large}`) | ratio |"
    rows = [head, "|---|---:|---:|---:|"]
    for section in ("latency_ms", "peers_latency_ms"):
        for key, x in a.get(section, {}).items():
            y = b.get(section, {}).get(key)
            if y:
                rows.append(
                    f"| {key}, p50 / p95 ms | {_pp(x)} | {_pp(y)} | "
                    f"{_ratio(y['p95_ms'], x['p95_ms'])} (p95) |"
                )
    for name, path in _COSTS:
        x, y = _get(a, path), _get(b, path)
        rows.append(f"| {name} | {_fmt(x)} | {_fmt(y)} | {_ratio(y, x)} |")
    return "\n".join([*rows, "", "Targets:", *_targets(a, b, small, large)])


_COSTS: list[tuple[str, tuple[str, ...]]] = [
    ("load: rows (COPY, tsvector, BM25 sums), s", ("load", "rows_s")),
    ("load: vectors (COPY), s", ("load", "embeddings_s")),
    ("build: GIN tsv, s", ("load", "index_build_s", "chunks_tsv_idx")),
    ("build: GIN trigram, s", ("load", "index_build_s", "chunks_content_trgm_idx")),
    ("build: HNSW, s", ("load", "index_build_s", "*HNSW*")),
    ("HNSW graph built in memory", ("load", "hnsw_graph_in_memory")),
    ("maintenance_work_mem", ("load", "maintenance_work_mem")),
    ("VACUUM ANALYZE, s", ("load", "vacuum_analyze_s")),
    ("database, MB", ("disk", "database_mb")),
    ("database, bytes per chunk", ("disk", "database_bytes_per_chunk")),
    ("HNSW, bytes per chunk", ("disk", "relations", "embeddings_hnsw_*", "bytes_per_chunk")),
    ("server PSS during latency, MB", ("server_memory_during_latency", "pss_mb")),
    ("server RSS during latency, MB", ("server_memory_during_latency", "rss_mb")),
    ("server PSS during builds, MB", ("load", "server_memory_during_builds", "pss_mb")),
    ("recall@10, shipped semantic search", ("recall", "shipped", "recall_at_10")),
    (f"smallest ef_search with recall@10 >= {RECALL_TARGET}", ("recall", "min_ef_search_for_0.95")),
]


def _targets(a: dict[str, Any], b: dict[str, Any], small: str, large: str) -> list[str]:
    out = []
    for mode in ("keyword", "hybrid"):
        x, y = (
            _get(a, ("latency_ms", f"{mode}/no_filter", "p95_ms")),
            _get(b, ("latency_ms", f"{mode}/no_filter", "p95_ms")),
        )
        out.append(
            f"- {mode} p95 `{large}` / `{small}`: {_ratio(y, x)} for "
            f"{_ratio(b['chunks'], a['chunks'])} the chunks (target <= {GROWTH_LIMIT:g}x)"
        )
    for label, run in ((small, a), (large, b)):
        lat = run.get("latency_ms", {})
        for mode in ("keyword", "semantic", "hybrid"):
            key, named = lat.get(f"{mode}/scoped_key"), lat.get(f"{mode}/collection")
            if key and named:
                out.append(
                    f"- `{label}` {mode}: scoped key / unscoped with the collection filter "
                    f"p50 {_ratio(key['p50_ms'], named['p50_ms'])}, "
                    f"p95 {_ratio(key['p95_ms'], named['p95_ms'])} (target <= {SCOPED_LIMIT:g}x)"
                )
        ours = _get(run, ("latency_ms", "hybrid/no_filter", "p95_ms"))
        for peer, p in run.get("peers_latency_ms", {}).items():
            out.append(
                f"- `{label}` pgrag hybrid p95 / {peer} p95: {_ratio(ours, p['p95_ms'])} (target <= 1x)"
            )
        rec = _get(run, ("recall", "shipped", "recall_at_10"))
        out.append(
            f"- `{label}` recall@10 of the shipped semantic search: {_fmt(rec)} "
            f"(target >= {RECALL_TARGET})"
        )
    return out


def _get(d: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(d, dict):
            return None
        if "*" in key:  # a name that holds the set id or the build parameters
            part = key.strip("*")
            key = next((k for k in d if k.startswith(part) or part in k), "")
        d = d.get(key)
    return d


def _pp(x: dict[str, Any]) -> str:
    return f"{x['p50_ms']:,.1f} / {x['p95_ms']:,.1f}"


def _fmt(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return f"{x:,.4g}" if x < 1 else f"{x:,.1f}"
    if isinstance(x, int) and not isinstance(x, bool):
        return f"{x:,}"
    return str(x)


def _ratio(y: Any, x: Any) -> str:
    if any(isinstance(v, bool) or not isinstance(v, int | float) for v in (x, y)):
        return ""
    return f"{y / x:.2f}x" if x else ""
