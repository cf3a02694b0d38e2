"""pgrag search at 100,000+ chunks on one server: latency per mode, index build times, disk
per chunk, the server's memory, regex searches without a time limit, HNSW recall@10 against
exact search (with an ef_search sweep), and the peers' hybrid recipes on the same tables and
queries.

The corpus is synthetic but shaped like real text: every chunk is a title and 3-7 sentences
drawn at random from SciFact abstracts (so lexeme frequencies stay Zipf-like), in documents
of 5 chunks spread over 100 folders. Each chunk's vector is its source passage's SciFact
vector plus Gaussian noise, renormalised, so the HNSW graph sees clustered data. Queries
are SciFact test claims with their real query vectors. Indexes are dropped before the load
and timed while rebuilt.

    python benchmarks/scale/scale.py                  # 100,000 chunks
    python benchmarks/scale/scale.py --chunks 20000 --queries 50
    python benchmarks/scale/scale.py --growth 100k 1m   # two runs side by side, with ratios
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: support.py
import scale_growth
import scale_load
import scale_probes
import support
from peers import measure_peers

SEED = 20240601
SEARCH_SQL = """
SELECT chunk_id FROM pgrag.hybrid_search(
    %(query)s, %(embedding)s, 10, %(collections)s, %(filters)s,
    opts => pgrag.ranking_options(rrf_k => 60, lexical_weight => %(lw)s,
                                  semantic_weight => %(sw)s, pool_size => 100{extra}))
"""
SIZES_SQL = """
SELECT c.relname, pg_relation_size(c.oid), pg_total_relation_size(c.oid), c.relkind
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'pgrag' AND c.relkind IN ('r', 'i')
  AND (c.relname IN ('chunks', 'embeddings', 'documents', 'units')
       OR c.relname LIKE 'chunks%%idx' OR c.relname LIKE 'embeddings%%')
ORDER BY pg_total_relation_size(c.oid) DESC
"""
SERVER_SQL = """
SELECT split_part(version(), ' ', 2), (SELECT extversion FROM pg_extension WHERE extname = 'vector'),
       current_setting('shared_buffers'), current_setting('hnsw.ef_search')
"""
MODES = {"keyword": (1.0, 0.0), "semantic": (0.0, 1.0), "hybrid": (1.0, 1.0)}
# the default fusion without its proximity term (no windows computed): what the proximity
# among a document's chunks costs at this size (5 chunks per document), in the same run
EXTRA = {"hybrid_noprox": ", proximity_weight => 0"}
MODES["hybrid_noprox"] = (1.0, 1.0)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--chunks", type=int, default=100_000)
    p.add_argument("--queries", type=int, default=200, help="SciFact test queries per mode")
    p.add_argument("--dsn", default=None, help="use this server instead of an embedded one")
    p.add_argument("--out", type=Path, default=support.RESULTS / "scale.json")
    p.add_argument("--label", default="latest")
    p.add_argument("--keep", action="store_true", help="keep the database (with --dsn)")
    p.add_argument("--no-latency", action="store_true", help="load and measure sizes only")
    p.add_argument(
        "--maintenance-work-mem",
        default=None,
        help="for the index builds (default: enough for an in-memory HNSW build)",
    )
    p.add_argument(
        "--growth",
        nargs=2,
        metavar=("SMALL", "LARGE"),
        help="print two runs (labels in --out) side by side with their ratios, then exit",
    )
    return p.parse_args(argv)


def measure(
    conn: psycopg.Connection, queries: list[str], vectors: np.ndarray
) -> dict[str, dict[str, Any]]:
    """p50/p95 SQL latency per mode, without and with a folder filter (~1% of chunks); and
    each mode naming the collection (all the chunks here): BM25 then takes the
    statistics of the collections searched from the per-collection sums the writers keep
    (migration 0023); and the same as a key limited to the collection (pgrag.enter_scope in
    each search's transaction), which reads the same sums."""
    from psycopg.types.json import Jsonb

    cid = conn.execute("SELECT id FROM pgrag.collections WHERE name = 'scale'").fetchone()[0]
    out: dict[str, dict[str, Any]] = {}
    for label, filters, collections in (
        ("no_filter", {}, None),
        ("folder_filter", {"folder": "f042"}, None),
        ("collection", {}, [cid]),
        ("scoped_key", {}, [cid]),
    ):
        for mode, (lw, sw) in MODES.items():
            if collections and mode == "hybrid_noprox":
                continue
            params = [
                {
                    "query": q if lw else None,
                    "embedding": v if sw else None,
                    "collections": collections,
                    "filters": Jsonb(filters),
                    "lw": lw,
                    "sw": sw,
                }
                for q, v in zip(queries, vectors, strict=True)
            ]
            search_sql = SEARCH_SQL.format(extra=EXTRA.get(mode, ""))
            scoped = label == "scoped_key"
            for p in params[:5]:
                _search(conn, search_sql, p, scoped)
            seconds, hits = [], []
            for p in params:
                t = time.perf_counter()
                rows = _search(conn, search_sql, p, scoped)
                seconds.append(time.perf_counter() - t)
                hits.append(len(rows))
            out[f"{mode}/{label}"] = {
                **support.percentiles_ms(seconds),
                "mean_hits": round(float(np.mean(hits)), 1),
            }
            print(f"   {mode:<9} {label:<14} {out[f'{mode}/{label}']}", flush=True)
    return out


def _search(
    conn: psycopg.Connection, search_sql: str, params: dict[str, Any], scoped: bool
) -> list[Any]:
    """One search; `scoped`: in a transaction that entered the collection's scope first, as
    a collection-limited key's request does (pgrag.db.scope)."""
    if not scoped:
        return conn.execute(search_sql, params).fetchall()
    with conn.transaction():
        conn.execute("SELECT pgrag.enter_scope('scale')")
        return conn.execute(search_sql, params).fetchall()


def sizes(conn: psycopg.Connection, chunks: int) -> dict[str, Any]:
    rows = conn.execute(SIZES_SQL).fetchall()
    db = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    mb = 1024 * 1024
    return {
        "database_mb": round(db / mb, 1),
        "database_bytes_per_chunk": round(db / chunks),
        "relations": {
            name: {
                "kind": "index" if kind == "i" else "table",
                "mb": round(size / mb, 1),
                "total_mb": round(total / mb, 1),
                "bytes_per_chunk": round(total / chunks),
            }
            for name, size, total, kind in rows
        },
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.growth:
        print(scale_growth.report(json.loads(args.out.read_text()), *args.growth))
        return 0
    signal.signal(signal.SIGTERM, _terminate)
    rng = np.random.default_rng(SEED)
    src = support.load_set("scifact", "test")
    qvec, _ = support.query_vectors("scifact", src.queries)
    queries = list(src.queries.values())[: args.queries]
    corpus = scale_load.synthesize(src, args.chunks, rng)
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "complete": False,
        "chunks": args.chunks,
        "documents": -(-args.chunks // scale_load.CHUNKS_PER_DOCUMENT),
        "corpus": __doc__.split("\n\n")[1].replace("\n", " "),
        "latency": "SQL round trip of pgrag.hybrid_search (10 hits, pool 100), one query at a "
        "time after 5 warm-up queries; filter = {'folder': 'f042'} (~1% of chunks); "
        "collection = the one collection named (every chunk), keyword and hybrid; "
        "scoped_key = the same in a transaction that entered the collection's scope; "
        "peers = their recipes on the same tables and queries (benchmarks/scale/peers.py)",
        "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3],
    }
    with support.server(args.dsn) as admin:
        dsn = support.fresh_database(admin, "pgrag_bench_scale")
        try:
            run(args, dsn, result, corpus, queries, qvec[: len(queries)])
        finally:
            if not args.keep:
                support.drop_database(admin, dsn)
    result["complete"] = True
    result["loadavg_at_end"] = Path("/proc/loadavg").read_text().split()[:3]
    save(args, result)
    return 0


def run(
    args: argparse.Namespace,
    dsn: str,
    result: dict[str, Any],
    corpus: tuple[list[str], list[str], np.ndarray],
    queries: list[str],
    qvec: np.ndarray,
) -> None:
    """Load, sizes, latency (pgrag's, then the peers' recipes', the server's memory sampled
    meanwhile), then recall; the result is saved after each phase, so that a run stopped
    by `timeout` keeps what it measured."""
    mwm = args.maintenance_work_mem or scale_load.maintenance_work_mem(args.chunks)
    print(f"loading {args.chunks} chunks (maintenance_work_mem {mwm}) ...", flush=True)
    result["load"] = scale_load.load(dsn, *corpus, mwm)
    print(f"   {result['load']}", flush=True)
    save(args, result)
    with support.connect(dsn) as conn:
        conn.execute("SELECT '[1]'::vector")  # loads pgvector, which defines hnsw.*
        result["server"] = dict(
            zip(
                ("postgres", "pgvector", "shared_buffers", "hnsw.ef_search"),
                conn.execute(SERVER_SQL).fetchone(),
                strict=True,
            )
        )
        result["disk"] = sizes(conn, args.chunks)
        save(args, result)
        if args.no_latency:
            return
        with scale_probes.ServerMemory(conn) as memory:
            result["latency_ms"] = measure(conn, queries, qvec)
            save(args, result)
            ef = conn.execute(scale_probes.SHIPPED_EF_SQL, ("scale",)).fetchone()[0]
            result["peers_latency_ms"] = _probe(measure_peers, conn, "scale", queries, qvec, ef)
        result["server_memory_during_latency"] = memory.result()
        print(f"   memory {result['server_memory_during_latency']}", flush=True)
        save(args, result)
        result["regex_ms"] = _probe(scale_probes.regex, conn)
        save(args, result)
        result["recall"] = _probe(scale_probes.recall, conn, "scale", qvec)
        save(args, result)


def _probe(fn: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """A probe whose statement fails is recorded as its error; the run goes on to the next."""
    try:
        return fn(*args)
    except psycopg.Error as exc:
        print(f"   {fn.__name__} failed: {exc}", flush=True)
        return {"error": str(exc)}


def save(args: argparse.Namespace, result: dict[str, Any]) -> None:
    data = json.loads(args.out.read_text()) if args.out.exists() else {}
    data[args.label] = result
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {args.out} [{args.label}]", flush=True)


def _terminate(signum: int, _frame: object) -> None:
    """SIGTERM (`timeout`) unwinds like an error: the database is dropped, the server stopped."""
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    raise SystemExit(main())
