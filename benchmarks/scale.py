"""Latency, index build time and disk size of pgrag search at 100,000+ chunks.

The corpus is synthetic but shaped like real text: every chunk is a title and 3-7 sentences
drawn at random from SciFact abstracts (so lexeme frequencies stay Zipf-like), in documents
of 5 chunks spread over 100 folders. Each chunk's vector is its source passage's SciFact
vector plus Gaussian noise, renormalised, so the HNSW graph sees clustered data. Queries
are SciFact test claims with their real query vectors. Indexes are dropped before the load
and timed while rebuilt.

    python benchmarks/scale.py                  # 100,000 chunks
    python benchmarks/scale.py --chunks 20000 --queries 50
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import re
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
import support

CHUNKS_PER_DOCUMENT = 5
FOLDERS = 100  # a folder filter keeps ~1% of the chunks
NOISE = 0.35  # norm of the noise added to a source vector, before renormalising
SEED = 20240601
MAINTENANCE_WORK_MEM = "512MB"

TEXT_INDEXES = ("chunks_tsv_idx", "chunks_content_trgm_idx")
DOCUMENTS_COPY = (
    "COPY pgrag.documents (id, collection_id, path, folder, name, file_type, title, status,"
    " progress) FROM STDIN"
)
INDEX_DEF_SQL = "SELECT pg_get_indexdef(%s::regclass)"
SEARCH_SQL = """
SELECT chunk_id FROM pgrag.hybrid_search(
    %(query)s, %(embedding)s, 10, %(collections)s, %(filters)s, 60, %(lw)s, %(sw)s, 100{extra})
"""
SIZES_SQL = """
SELECT c.relname, pg_relation_size(c.oid), pg_total_relation_size(c.oid), c.relkind
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'pgrag' AND c.relkind IN ('r', 'i')
  AND (c.relname IN ('chunks', 'embeddings', 'documents', 'units')
       OR c.relname LIKE 'chunks%%idx' OR c.relname LIKE 'embeddings%%')
ORDER BY pg_total_relation_size(c.oid) DESC
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
    return p.parse_args(argv)


def sentences(text: str) -> list[str]:
    return [x for x in re.split(r"(?<=[.!?])\s+", text) if len(x) > 20]


def synthesize(
    src: support.BeirSet, n_chunks: int, rng: np.random.Generator
) -> tuple[list[str], list[str], np.ndarray]:
    """(headings, contents, vectors) of n_chunks synthetic chunks. A document borrows a
    SciFact passage: its title as heading, its vector (plus noise) for every chunk, and one
    of its sentences to open each chunk; 2-6 sentences from anywhere follow."""
    per_doc = [sentences(t) or [t] for t in src.texts]
    pool = [x for ss in per_doc for x in ss]
    n_docs = -(-n_chunks // CHUNKS_PER_DOCUMENT)
    origin = np.repeat(rng.integers(0, len(src.doc_ids), n_docs), CHUNKS_PER_DOCUMENT)[:n_chunks]
    lengths = rng.integers(2, 7, n_chunks)
    picks = rng.integers(0, len(pool), int(lengths.sum()))
    contents, at = [], 0
    for o, k in zip(origin, lengths, strict=True):
        own = per_doc[o][int(rng.integers(0, len(per_doc[o])))]
        contents.append(" ".join([own, *(pool[i] for i in picks[at : at + k])]))
        at += k
    headings = [src.titles[o] for o in origin]
    noise = rng.standard_normal((n_chunks, src.vectors.shape[1])).astype(np.float32)
    noise *= NOISE / np.linalg.norm(noise, axis=1, keepdims=True)
    vectors = src.vectors[origin] + noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return headings, contents, vectors


def load(dsn: str, headings: list[str], contents: list[str], vectors: np.ndarray) -> dict[str, Any]:
    """Documents of CHUNKS_PER_DOCUMENT chunks in FOLDERS folders; indexes rebuilt and timed."""
    timings: dict[str, Any] = {}
    with support.connect(dsn) as conn:
        cid = conn.execute(support.COLLECTION_SQL, ("scale",)).fetchone()[0]
        set_id = asyncio.run(support.create_active_set(dsn, cid))
        hnsw = conn.execute("SELECT pgrag.ensure_embedding_index(%s)", (set_id,)).fetchone()[0]
        defs = {i: conn.execute(INDEX_DEF_SQL, (f"pgrag.{i}",)).fetchone()[0] for i in TEXT_INDEXES}
        for index in (*TEXT_INDEXES, hnsw):
            conn.execute(support.DROP_INDEX_SQL.format(index))
        t = time.perf_counter()
        chunk_ids = _copy_rows(conn, cid, headings, contents)
        timings["rows_s"] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
        support.copy_embeddings(conn, set_id, list(zip(chunk_ids, vectors, strict=True)))
        timings["embeddings_s"] = round(time.perf_counter() - t, 1)
        conn.execute(f"SET maintenance_work_mem = '{MAINTENANCE_WORK_MEM}'")
        builds = {}
        for name, ddl in defs.items():
            t = time.perf_counter()
            conn.execute(ddl)
            builds[name] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
        conn.execute("SELECT pgrag.ensure_embedding_index(%s)", (set_id,))
        builds[f"{hnsw} (HNSW m=16, ef_construction=64)"] = round(time.perf_counter() - t, 1)
        timings["index_build_s"] = builds
        timings["maintenance_work_mem"] = MAINTENANCE_WORK_MEM
        t = time.perf_counter()
        conn.execute("VACUUM ANALYZE pgrag.documents, pgrag.units, pgrag.chunks, pgrag.embeddings")
        timings["vacuum_analyze_s"] = round(time.perf_counter() - t, 1)
    return timings


def _copy_rows(
    conn: psycopg.Connection, cid: int, headings: list[str], contents: list[str]
) -> list[int]:
    """Documents, one unit each (the chunks joined) and the chunks; chunk ids in input order."""
    n_docs = -(-len(contents) // CHUNKS_PER_DOCUMENT)
    doc_ids = [uuid.UUID(int=i + 1) for i in range(n_docs)]
    parts = [
        contents[i * CHUNKS_PER_DOCUMENT : (i + 1) * CHUNKS_PER_DOCUMENT] for i in range(n_docs)
    ]
    with conn.transaction():
        with conn.cursor() as cur, cur.copy(DOCUMENTS_COPY) as copy:
            for i, d in enumerate(doc_ids):
                folder, name = f"f{i % FOLDERS:03d}", f"doc{i:06d}.txt"
                title = headings[i * CHUNKS_PER_DOCUMENT]
                copy.write_row(
                    (d, cid, f"{folder}/{name}", folder, name, "txt", title, "ready", 100)
                )
        with conn.cursor() as cur, cur.copy(support.UNITS_COPY) as copy:
            for d, part in zip(doc_ids, parts, strict=True):
                copy.write_row((cid, d, "text", 1, None, "\n\n".join(part)))
        unit_of = dict(conn.execute("SELECT document_id, id FROM pgrag.units").fetchall())
        with conn.cursor() as cur, cur.copy(support.CHUNKS_COPY) as copy:
            for i, (d, part) in enumerate(zip(doc_ids, parts, strict=True)):
                heading, offset = headings[i * CHUNKS_PER_DOCUMENT], 0
                for ordinal, text in enumerate(part, start=1):
                    digest = hashlib.sha256(support.embed_text(heading, text).encode()).digest()
                    tokens = max(1, round(len(text.split()) * 1.3))
                    end = offset + len(text)
                    row = (
                        d,
                        cid,
                        unit_of[d],
                        ordinal,
                        heading,
                        text,
                        digest,
                        tokens,
                        offset,
                        end,
                        "en",
                    )
                    copy.write_row(row)
                    offset = end + 2
    rows = conn.execute("SELECT id, document_id, ordinal FROM pgrag.chunks").fetchall()
    at = {(doc, ordinal): cid_ for cid_, doc, ordinal in rows}
    return [
        at[(doc_ids[j // CHUNKS_PER_DOCUMENT], j % CHUNKS_PER_DOCUMENT + 1)]
        for j in range(len(contents))
    ]


def measure(
    conn: psycopg.Connection, queries: list[str], vectors: np.ndarray
) -> dict[str, dict[str, Any]]:
    """p50/p95 SQL latency per mode, without and with a folder filter (~1% of chunks); and
    keyword and hybrid naming the collection (all the chunks here): BM25 then takes the
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
            if collections and mode in ("semantic", "hybrid_noprox"):
                continue  # the lexical leg's statistics are what this row measures
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


def sizes(conn: psycopg.Connection) -> dict[str, Any]:
    rows = conn.execute(SIZES_SQL).fetchall()
    db = conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    mb = 1024 * 1024
    return {
        "database_mb": round(db / mb, 1),
        "relations": {
            name: {
                "kind": "index" if kind == "i" else "table",
                "mb": round(size / mb, 1),
                "total_mb": round(total / mb, 1),
            }
            for name, size, total, kind in rows
        },
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rng = np.random.default_rng(SEED)
    src = support.load_set("scifact", "test")
    qvec, _ = support.query_vectors("scifact", src.queries)
    queries = list(src.queries.values())[: args.queries]
    headings, contents, vectors = synthesize(src, args.chunks, rng)
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "chunks": args.chunks,
        "documents": -(-args.chunks // CHUNKS_PER_DOCUMENT),
        "corpus": __doc__.split("\n\n")[1].replace("\n", " "),
        "latency": "SQL round trip of pgrag.hybrid_search (10 hits, pool 100), one query at a "
        "time after 5 warm-up queries; filter = {'folder': 'f042'} (~1% of chunks); "
        "collection = the one collection named (every chunk), keyword and hybrid; "
        "scoped_key = the same in a transaction that entered the collection's scope",
        "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3],
    }
    with support.server(args.dsn) as admin:
        dsn = support.fresh_database(admin, "pgrag_bench_scale")
        try:
            print(f"loading {args.chunks} chunks ...", flush=True)
            result["load"] = load(dsn, headings, contents, vectors)
            print(f"   {result['load']}", flush=True)
            with support.connect(dsn) as conn:
                result["disk"] = sizes(conn)
                if not args.no_latency:
                    result["latency_ms"] = measure(conn, queries, qvec[: len(queries)])
        finally:
            if not args.keep:
                support.drop_database(admin, dsn)
    data = json.loads(args.out.read_text()) if args.out.exists() else {}
    data[args.label] = result
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {args.out} [{args.label}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
