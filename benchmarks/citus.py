"""SciFact on one server and on a 2-worker Citus cluster, through pgrag's search service.

The 5,183 SciFact passages are split over COLLECTIONS collections (crc32 of the BEIR id
modulo COLLECTIONS) and loaded, with the cached full-passage vectors (nothing embedded at
run time but the 300 test queries, once, cached), into

- `single`: a plain PostgreSQL database (on the coordinator's server, without the citus
  extension, PGRAG_DISTRIBUTED=false: the same binaries and settings as the cluster), and
- `cluster`: a database distributed by `PGRAG_DISTRIBUTED=true pgrag migrate` over a
  coordinator and two workers (tests/support/citus.py builds and starts them).

Then every test query runs through `SearchService.search` (what REST, MCP and the CLI
call; the query vector comes from the cache instead of the model) in each mode, unscoped
(all collections) and scoped to the collection holding the query's first relevant
passage, on both. Printed in one run and written to benchmarks/results/citus.json:

- nDCG@10 of each (single and cluster must agree within 0.005; a difference is named,
  with the queries whose top 10 differ);
- per-query latency p50/p95 of each, of the whole search and of its ranking SQL alone
  (the engine's ranking call, timed by a wrapper), and the ratios cluster / single;
- shards touched per query on the cluster (distinct shard groups in the remote commands
  Citus logs with citus.log_remote_commands, a separate untimed pass);
- load throughput (bulk COPY + HNSW, chunks/s), and pgrag's own ingestion path
  (Ingestor, one transaction per document, `hash/384` embedder so that no model time
  counts) on --ingest-docs more passages;
- per-shard figures for the cost model: HNSW / GIN / table bytes per chunk on the
  workers' shards, and SQL probes: a kNN on one shard, the same over every shard, and a
  fan-out that finds nothing (the per-task overhead).

    python benchmarks/citus.py [--docs N] [--queries N] [--modes hybrid,keyword,semantic]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg_pool import AsyncConnectionPool

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import support

from pgrag.embeddings.base import EmbeddingProvider
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.language import detect_language
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from tests.support.citus import CitusCluster, citus_cluster, migrate

COLLECTIONS = 4
LIMIT = 10
WARMUP = 5
TOLERANCE = 0.005
PROBE_REPEAT = 60
SIDES = ("single", "cluster")


# -- the corpus ----------------------------------------------------------------------------


def collection_of(doc_id: str) -> int:
    """The deterministic split: crc32 of the BEIR id (spreads every topic over all four)."""
    return zlib.crc32(doc_id.encode()) % COLLECTIONS


def subset(s: support.BeirSet, docs: int | None, queries: int | None) -> support.BeirSet:
    """The first `queries` judged queries and `docs` passages (every relevant one kept)."""
    qids = list(s.queries)[:queries] if queries else list(s.queries)
    qrels = {q: s.qrels[q] for q in qids}
    if docs and docs < len(s.doc_ids):
        relevant = {d for q in qrels for d in qrels[q]}
        keep = [i for i, d in enumerate(s.doc_ids) if d in relevant]
        others = [i for i, d in enumerate(s.doc_ids) if d not in relevant]
        rows = sorted(keep + others[: max(0, docs - len(keep))])
    else:
        rows = list(range(len(s.doc_ids)))
    return support.BeirSet(
        name=s.name,
        doc_ids=[s.doc_ids[i] for i in rows],
        titles=[s.titles[i] for i in rows],
        texts=[s.texts[i] for i in rows],
        queries={q: s.queries[q] for q in qids},
        qrels=qrels,
        vectors=s.vectors[rows],
        embedding_note=s.embedding_note,
    )


class CachedQueries(EmbeddingProvider):
    """The bundled model's query vectors, computed once (support.query_vectors, cached):
    the search path runs unchanged, the model's ~35 ms per query does not count."""

    model = support.MODEL

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    @property
    def dimensions(self) -> int:
        return support.DIMENSIONS

    async def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts])


# -- loading -------------------------------------------------------------------------------

# documents, units and chunks load with support's COPY statements (as quality.py loads
# them); the vectors with every column Citus needs (no trigger fills collection_id,
# document_id and lang there)
EMBEDDINGS_COPY = (
    "COPY pgrag.embeddings (collection_id, set_id, chunk_id, document_id, lang, embedding)"
    " FROM STDIN (FORMAT BINARY)"
)


@dataclass
class Loaded:
    collections: dict[int, int]  # split index -> collection id
    names: dict[int, str]  # split index -> collection name
    sets: list[int]
    chunks: int
    timings: dict[str, float] = field(default_factory=dict)


def load(dsn: str, s: support.BeirSet) -> Loaded:
    """Documents, one `text` unit and one chunk per passage (heading = title), the cached
    vectors as each collection's active set; HNSW built once the rows are in, the
    per-language sums recounted (what the triggers keep on a single server and the
    writer on Citus), then VACUUM ANALYZE. Timed step by step."""
    import hashlib

    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    split = [collection_of(d) for d in s.doc_ids]
    uuids = [uuid.uuid5(uuid.NAMESPACE_URL, f"beir:{d}") for d in s.doc_ids]
    with support.connect(dsn) as conn:
        names = {i: f"scifact-{i}" for i in range(COLLECTIONS)}
        cids = {
            i: conn.execute(support.COLLECTION_SQL, (n,)).fetchone()[0] for i, n in names.items()
        }
        sets = [asyncio.run(support.create_active_set(dsn, cids[i])) for i in range(COLLECTIONS)]
        for set_id in sets:  # rebuilt below, faster than row by row
            conn.execute(f"DROP INDEX IF EXISTS pgrag.embeddings_hnsw_{set_id}")
        with conn.transaction():
            with conn.cursor() as cur, cur.copy(support.DOCUMENTS_COPY) as copy:
                for u, d, title, text, k in zip(
                    uuids, s.doc_ids, s.titles, s.texts, split, strict=True
                ):
                    body = text.encode()
                    copy.write_row(
                        (u, cids[k], f"{d}.txt", f"{d}.txt", "txt", len(body),
                         hashlib.sha256(body).hexdigest(), title or None, "ready", 100, "now",
                         json.dumps({"beir_id": d}))
                    )  # fmt: skip
            with conn.cursor() as cur, cur.copy(support.UNITS_COPY) as copy:
                for u, text, k in zip(uuids, s.texts, split, strict=True):
                    copy.write_row((cids[k], u, "text", 1, None, text))
            unit_of = dict(conn.execute("SELECT document_id, id FROM pgrag.units").fetchall())
            langs = [detect_language(t) for t in s.texts]  # as ingestion does
            with conn.cursor() as cur, cur.copy(support.CHUNKS_COPY) as copy:
                for u, title, text, k, lang in zip(
                    uuids, s.titles, s.texts, split, langs, strict=True
                ):
                    digest = hashlib.sha256(support.embed_text(title, text).encode()).digest()
                    tokens = max(1, round(len(text.split()) * 1.3))  # estimate: paging only
                    copy.write_row(
                        (u, cids[k], unit_of[u], 1, title or None, text, digest, tokens, 0,
                         len(text), lang)
                    )  # fmt: skip
        timings["rows_s"] = time.perf_counter() - t0
        t = time.perf_counter()
        row_of = {u: i for i, u in enumerate(uuids)}
        chunk_rows = conn.execute("SELECT id, document_id FROM pgrag.chunks").fetchall()
        with conn.cursor() as cur, cur.copy(EMBEDDINGS_COPY) as copy:
            copy.set_types(["int8", "int8", "int8", "uuid", "text", "vector"])
            for chunk_id, doc in chunk_rows:
                i = row_of[doc]
                copy.write_row(
                    (cids[split[i]], sets[split[i]], chunk_id, doc, langs[i] or "und", s.vectors[i])
                )
        timings["embeddings_s"] = time.perf_counter() - t
        t = time.perf_counter()
        for set_id in sets:
            conn.execute("SELECT pgrag.recount_language_sums(%s)", (set_id,))
        timings["language_sums_s"] = time.perf_counter() - t
        t = time.perf_counter()
        for set_id in sets:
            conn.execute("SELECT pgrag.ensure_embedding_index(%s)", (set_id,))
        timings["hnsw_build_s"] = time.perf_counter() - t
        t = time.perf_counter()
        conn.execute("VACUUM ANALYZE pgrag.documents, pgrag.units, pgrag.chunks, pgrag.embeddings")
        timings["analyze_s"] = time.perf_counter() - t
    total = time.perf_counter() - t0
    timings = {k: round(v, 2) for k, v in timings.items()}
    timings["total_s"] = round(total, 2)
    timings["chunks_per_s"] = round(len(chunk_rows) / total, 1)
    return Loaded(cids, names, sets, len(chunk_rows), timings)


# -- searching -----------------------------------------------------------------------------


@dataclass
class RemoteLog:
    """Remote commands Citus reports (citus.log_remote_commands) since the last reset."""

    commands: list[tuple[str, str]] = field(default_factory=list)  # (command, server)

    def handler(self, diag: psycopg.errors.Diagnostic) -> None:
        msg = diag.message_primary or ""
        if msg.startswith("issuing "):
            self.commands.append((msg[len("issuing ") :], diag.message_detail or ""))


SHARD_RE = re.compile(r"pgrag\.\"?([a-z][a-z0-9_]*)_(\d{6,})\b")


def make_pool(dsn: str, log: RemoteLog | None) -> AsyncConnectionPool:
    from pgvector.psycopg import register_vector_async

    async def configure(conn: psycopg.AsyncConnection) -> None:
        await register_vector_async(conn)
        if log is not None:
            await conn.execute("SET citus.log_remote_commands = on")
            conn.add_notice_handler(log.handler)

    return AsyncConnectionPool(
        dsn, min_size=1, max_size=1, open=False, configure=configure, kwargs={"autocommit": True}
    )


@dataclass
class RankTimer:
    """Seconds of the last ranking statement (pgrag.hybrid_search through the engine)."""

    last: float = 0.0


def time_ranking() -> RankTimer:
    """Wrap the engine's ranking call so that each search also reports its ranking SQL
    alone, without the hit building (snippets, context) that follows in Python."""
    from pgrag.search import ranking

    timer = RankTimer()
    original = ranking._ranked

    async def timed(conn: psycopg.AsyncConnection, query: str, params: dict[str, Any]) -> Any:
        t = time.perf_counter()
        try:
            return await original(conn, query, params)
        finally:
            timer.last = time.perf_counter() - t

    ranking._ranked = timed  # type: ignore[assignment]
    return timer


RANK_TIMER = time_ranking()


def request(text: str, mode: str, collection: str | None) -> SearchRequest:
    filters = {"collection": collection} if collection else {}
    return SearchRequest(query=text, mode=mode, limit=LIMIT, max_tokens=25000, filters=filters)


async def run_searches(
    dsn: str,
    s: support.BeirSet,
    provider: CachedQueries,
    modes: list[str],
    scope_of: dict[str, str],
) -> dict[str, dict[str, Any]]:
    """Every (mode, scope) over every query: {"mode/scope": {run, seconds}}."""
    out: dict[str, dict[str, Any]] = {}
    pool = make_pool(dsn, None)
    await pool.open()
    try:
        service = SearchService(pool, provider, log_searches=False)
        for mode in modes:
            for scope in ("all", "scoped"):
                reqs = {
                    q: request(t, mode, scope_of[q] if scope == "scoped" else None)
                    for q, t in s.queries.items()
                }
                for req in list(reqs.values())[:WARMUP]:
                    await service.search(req)
                run, seconds, ranking = {}, [], []
                for qid, req in reqs.items():
                    t = time.perf_counter()
                    page = await service.search(req)
                    seconds.append(time.perf_counter() - t)
                    ranking.append(RANK_TIMER.last)
                    run[qid] = [h.path.removesuffix(".txt") for h in page.data.results]
                out[f"{mode}/{scope}"] = {"run": run, "seconds": seconds, "ranking": ranking}
                p, r = support.percentiles_ms(seconds), support.percentiles_ms(ranking)
                print(
                    f"   {mode:<8} {scope:<6} search {p['p50_ms']}/{p['p95_ms']} ms, "
                    f"ranking SQL {r['p50_ms']}/{r['p95_ms']} ms",
                    flush=True,
                )
    finally:
        await pool.close()
    return out


async def shards_touched(
    dsn: str,
    s: support.BeirSet,
    provider: CachedQueries,
    modes: list[str],
    scope_of: dict[str, str],
    shard_group: dict[int, int],
    queries: int,
) -> dict[str, dict[str, Any]]:
    """Untimed pass on the cluster: per query, the distinct shard groups (co-located shards
    of one hash range count once), remote tasks and workers in the commands Citus issued,
    for the first `queries` queries (the shape of the plan, not the data, decides it)."""
    log = RemoteLog()
    pool = make_pool(dsn, log)
    await pool.open()
    out: dict[str, dict[str, Any]] = {}
    try:
        service = SearchService(pool, provider, log_searches=False)
        for mode in modes:
            for scope in ("all", "scoped"):
                groups, tasks, workers = [], [], []
                statements: Counter[str] = Counter()
                for n, (qid, text) in enumerate(list(s.queries.items())[:queries]):
                    req = request(text, mode, scope_of[qid] if scope == "scoped" else None)
                    log.commands.clear()
                    await service.search(req)
                    shard_ids = [
                        {int(m.group(2)) for m in SHARD_RE.finditer(cmd)} for cmd, _ in log.commands
                    ]
                    if n == 0:  # which statements of one search run on how many shards
                        statements.update(
                            _statement(cmd) for (cmd, _), ids in
                            zip(log.commands, shard_ids, strict=True) if ids
                        )  # fmt: skip
                    touched = {shard_group[i] for ids in shard_ids for i in ids if i in shard_group}
                    groups.append(len(touched))
                    tasks.append(sum(1 for ids in shard_ids if ids))
                    workers.append(
                        len({srv.split(" connectionId")[0] for (_, srv), ids in
                             zip(log.commands, shard_ids, strict=True) if ids})
                    )  # fmt: skip
                out[f"{mode}/{scope}"] = {
                    "shards_per_query": _spread(groups),
                    "remote_tasks_per_query": _spread(tasks),
                    "workers_per_query": _spread(workers),
                    "first_query_statements": [
                        {"tasks": k, "statement": st} for st, k in statements.most_common()
                    ],
                }
    finally:
        await pool.close()
    return out


def _statement(command: str) -> str:
    """A remote command without its shard ids and literals, cut short: one line per
    statement of pgrag's search, however many shards it ran on."""
    text = re.sub(r"_\d{6,}\b", "", command)
    text = re.sub(r"'(?:[^']|'')*'", "'…'", text)
    return re.sub(r"\s+", " ", text)[:160]


def _spread(values: list[int]) -> dict[str, float]:
    return {
        "min": min(values),
        "median": statistics.median(values),
        "max": max(values),
        "mean": round(statistics.fmean(values), 2),
    }


# -- per-shard figures ---------------------------------------------------------------------

SIZES_SQL = """
SELECT t.relname AS tbl, c.relname AS idx, am.amname AS am, pg_relation_size(c.oid) AS bytes
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_class t ON t.oid = i.indrelid
JOIN pg_am am ON am.oid = c.relam
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = 'pgrag' AND t.relname ~ '^(chunks|embeddings|documents|units)(_[0-9]+)?$'
"""
TABLES_SQL = """
SELECT t.relname, pg_table_size(t.oid), t.reltuples::bigint
FROM pg_class t JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = 'pgrag' AND t.relkind = 'r'
  AND t.relname ~ '^(chunks|embeddings|documents|units)(_[0-9]+)?$'
"""


def sizes(dsns: list[str], shard_group: dict[int, int]) -> dict[str, Any]:
    """Bytes of every index kind and table, per shard group (single server: group 0)."""
    groups: dict[int, dict[str, float]] = {}
    for dsn in dsns:
        with psycopg.connect(dsn, autocommit=True) as conn:
            if shard_group:  # workers hide shards from pg_class unless asked
                conn.execute("SET citus.show_shards_for_app_name_prefixes = '*'")
            for tbl, idx, am, nbytes in conn.execute(SIZES_SQL).fetchall():
                g = _group(tbl, shard_group)
                if g is None:
                    continue
                base = tbl.rsplit("_", 1)[0] if shard_group else tbl
                kind = "hnsw" if am == "hnsw" else f"{base}_{am}"
                if am == "gin" and base == "chunks":
                    kind = "gin_tsv" if "tsv" in idx else "gin_chunks_other"
                bucket = groups.setdefault(g, {})
                bucket[kind] = bucket.get(kind, 0) + nbytes
            for tbl, nbytes, rows in conn.execute(TABLES_SQL).fetchall():
                g = _group(tbl, shard_group)
                if g is None:
                    continue
                base = tbl.rsplit("_", 1)[0] if shard_group else tbl
                bucket = groups.setdefault(g, {})
                bucket[f"{base}_table"] = bucket.get(f"{base}_table", 0) + nbytes
                if base == "chunks":
                    bucket["chunks"] = bucket.get("chunks", 0) + max(rows, 0)
    return {str(g): {k: int(v) for k, v in b.items()} for g, b in sorted(groups.items())}


def _group(table: str, shard_group: dict[int, int]) -> int | None:
    if not shard_group:
        return 0
    m = re.search(r"_(\d{6,})$", table)
    return shard_group.get(int(m.group(1))) if m else None


def per_chunk(groups: dict[str, Any]) -> dict[str, float]:
    """Bytes per chunk of each kind, over the groups holding chunks."""
    held = [b for b in groups.values() if b.get("chunks", 0) > 0]
    chunks = sum(b["chunks"] for b in held)
    kinds = sorted({k for b in held for k in b if k != "chunks"})
    return {k: round(sum(b.get(k, 0) for b in held) / chunks, 1) for k in kinds} | {
        "chunks": chunks
    }


def probes(dsn: str, loaded: Loaded, qvec: np.ndarray, texts: list[str]) -> dict[str, Any]:
    """Plain-SQL costs the cost model needs, p50/p95 ms over PROBE_REPEAT queries:
    kNN top 10 in one collection (1 shard), the same over every shard (no collection
    predicate), a full-text count in one collection and over every shard, and a fan-out
    that finds nothing (per-task overhead)."""
    cid, set_id = loaded.collections[0], loaded.sets[0]
    dims = support.DIMENSIONS
    knn = (
        f"SELECT chunk_id FROM pgrag.embeddings WHERE set_id = {set_id} {{scope}}"
        f" ORDER BY embedding::vector({dims}) <=> %s::vector({dims}) LIMIT 10"
    )
    fts = (
        "SELECT count(*) FROM pgrag.chunks WHERE tsv @@ plainto_tsquery('pgrag.search', %s) {scope}"
    )
    cases: dict[str, tuple[str, Callable[[int], tuple[Any, ...]]]] = {
        "knn_one_collection": (
            knn.format(scope=f"AND collection_id = {cid}"),
            lambda i: (qvec[i % len(qvec)],),
        ),
        "knn_every_shard": (knn.format(scope=""), lambda i: (qvec[i % len(qvec)],)),
        "fts_count_one_collection": (
            fts.format(scope=f"AND collection_id = {cid}"),
            lambda i: (texts[i % len(texts)],),
        ),
        "fts_count_every_shard": (fts.format(scope=""), lambda i: (texts[i % len(texts)],)),
        "empty_fan_out": (
            "SELECT count(*) FROM pgrag.chunks WHERE document_id = %s",
            lambda i: (uuid.UUID(int=i),),
        ),
    }
    out = {}
    with support.connect(dsn) as conn:
        conn.execute("SET hnsw.ef_search = 40")
        for name, (sql, params) in cases.items():
            runs = []
            for i in range(PROBE_REPEAT + 3):
                t = time.perf_counter()
                conn.execute(sql.encode(), params(i)).fetchall()
                if i >= 3:
                    runs.append(time.perf_counter() - t)
            out[name] = support.percentiles_ms(runs)
    return out


# -- pgrag's ingestion path ----------------------------------------------------------------


async def ingest_path(
    dsn: str, s: support.BeirSet, first: int, docs: int, tmp: Path
) -> dict[str, Any]:
    """`docs` passages as .txt files through pgrag's Ingestor (parse, chunk, one transaction
    per document, `hash/384` vectors: no model time) into a collection of their own."""
    from pgrag.db.database import open_database
    from pgrag.ingest.pipeline import Ingestor
    from pgrag.settings import load_settings

    root = tmp / "ingest"
    root.mkdir(parents=True, exist_ok=True)
    picked = range(first, min(first + docs, len(s.doc_ids)))
    for i in picked:
        (root / f"{s.doc_ids[i]}.txt").write_text(
            support.embed_text(s.titles[i], s.texts[i]), encoding="utf-8"
        )
    async with open_database(load_settings(), dsn=dsn, max_size=4) as db:
        t = time.perf_counter()
        summary = await Ingestor(db.pool, HashEmbedder("hash/384"), collection="ingest").run([root])
        seconds = time.perf_counter() - t
        async with db.pool.connection() as conn:
            row = await (
                await conn.execute(
                    "SELECT count(*) FROM pgrag.chunks c JOIN pgrag.collections k"
                    " ON k.id = c.collection_id WHERE k.name = 'ingest'"
                )
            ).fetchone()
    chunks = int(row[0]) if row else 0
    return {
        "documents": len(picked),
        "failures": len(summary.failures),
        "chunks": chunks,
        "seconds": round(seconds, 2),
        "documents_per_s": round(len(picked) / seconds, 1),
        "chunks_per_s": round(chunks / seconds, 1),
    }


# -- the run -------------------------------------------------------------------------------


def shard_groups(dsn: str) -> dict[int, int]:
    """shard id -> index of its hash range (co-located shards share one)."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT s.shardid, s.shardminvalue::int FROM pg_dist_shard s"
            " JOIN pg_dist_partition p ON p.logicalrelid = s.logicalrelid"
            " WHERE p.partmethod = 'h'"
        ).fetchall()
    order = {v: i for i, v in enumerate(sorted({r[1] for r in rows}))}
    return {int(r[0]): order[r[1]] for r in rows}


def worker_dsns(cluster: CitusCluster, db: str) -> list[str]:
    return [cluster.dsn(db, port) for port in cluster.worker_ports]


@contextmanager
def databases(cluster: CitusCluster) -> Iterator[dict[str, str]]:
    """`single`: plain PostgreSQL (no citus extension) on the coordinator's server;
    `cluster`: distributed by pgrag's migration."""
    with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
        conn.execute('CREATE DATABASE "bench_single"')
    single = cluster.dsn("bench_single")
    asyncio.run(migrate(single, False))
    dist = cluster.create_database("bench_cluster")
    asyncio.run(migrate(dist, True))
    yield {"single": single, "cluster": dist}


def compare(runs: dict[str, dict[str, Any]], qrels: dict[str, dict[str, int]]) -> dict[str, Any]:
    """nDCG@10 per side, p50/p95 per side, ratio, and where the rankings differ."""
    out: dict[str, Any] = {}
    for key in runs["single"]:
        a, b = runs["single"][key], runs["cluster"][key]
        na = support.evaluate(a["run"], qrels)["nDCG@10"]
        nb = support.evaluate(b["run"], qrels)["nDCG@10"]
        la, lb = support.percentiles_ms(a["seconds"]), support.percentiles_ms(b["seconds"])
        ra, rb = support.percentiles_ms(a["ranking"]), support.percentiles_ms(b["ranking"])
        differ = [q for q in a["run"] if a["run"][q] != b["run"][q]]
        out[key] = {
            "nDCG@10": {"single": na, "cluster": nb, "diff": round(nb - na, 4)},
            "equal_within_tolerance": abs(nb - na) <= TOLERANCE,
            "queries_with_other_top10": len(differ),
            "first_differing": differ[:5],
            "latency_ms": {"single": la, "cluster": lb},
            "p50_ratio": round(lb["p50_ms"] / la["p50_ms"], 2),
            "p95_ratio": round(lb["p95_ms"] / la["p95_ms"], 2),
            "ranking_sql_ms": {"single": ra, "cluster": rb},
            "ranking_p50_ratio": round(rb["p50_ms"] / ra["p50_ms"], 2),
            "ranking_p95_ratio": round(rb["p95_ms"] / ra["p95_ms"], 2),
        }
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--docs", type=int, default=None, help="passages (default all 5,183)")
    p.add_argument("--queries", type=int, default=None, help="test queries (default all 300)")
    p.add_argument("--modes", default="hybrid,keyword,semantic")
    p.add_argument("--shard-queries", type=int, default=60, help="queries of the shard pass")
    p.add_argument("--ingest-docs", type=int, default=300, help="passages through Ingestor")
    p.add_argument("--out", type=Path, default=support.RESULTS / "citus.json")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    full = support.load_set("scifact", "test", None, "full")
    s = subset(full, args.docs, args.queries)
    rest = [i for i, d in enumerate(full.doc_ids) if d not in set(s.doc_ids)]
    qvec, _ = support.query_vectors("scifact", s.queries)
    provider = CachedQueries(dict(zip(s.queries.values(), qvec, strict=True)))
    split = {d: collection_of(d) for d in s.doc_ids}
    print(
        f"SciFact test: {len(s.doc_ids)} passages over {COLLECTIONS} collections "
        f"({[sum(1 for v in split.values() if v == k) for k in range(COLLECTIONS)]}), "
        f"{len(s.queries)} queries, modes {modes}",
        flush=True,
    )
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "passages": len(s.doc_ids),
        "queries": len(s.queries),
        "collections": COLLECTIONS,
        "split_rule": "crc32(BEIR id) % 4",
        "scoped_to": "the collection holding the query's first relevant passage",
        "latency": "SearchService.search wall time, limit 10, one query at a time on one "
        f"connection after {WARMUP} warm-up queries; query vectors precomputed",
    }
    os.environ.pop("PGRAG_DISTRIBUTED", None)  # each database is migrated explicitly
    t0 = time.perf_counter()
    with citus_cluster(workers=2) as cluster, databases(cluster) as dsns:
        print(f"cluster up in {time.perf_counter() - t0:.1f}s (build cached)", flush=True)
        groups = shard_groups(dsns["cluster"])
        result["environment"] = environment(dsns["single"], len(set(groups.values())))
        loaded: dict[str, Loaded] = {}
        for side in SIDES:
            loaded[side] = load(dsns[side], s)
            print(f"{side}: loaded {loaded[side].chunks} chunks {loaded[side].timings}", flush=True)
        names = loaded["single"].names
        with psycopg.connect(dsns["cluster"]) as conn:
            result["shard_group_of_collection"] = {
                names[i]: groups[
                    conn.execute(
                        "SELECT get_shard_id_for_distribution_column('pgrag.chunks', %s)", (cid,)
                    ).fetchone()[0]
                ]
                for i, cid in loaded["cluster"].collections.items()
            }
        result["shard_pass_queries"] = min(args.shard_queries, len(s.queries))
        scope_of = {q: names[split[next(iter(s.qrels[q]))]] for q in s.queries}
        runs = {}
        for side in SIDES:
            print(f"{side}: searching", flush=True)
            runs[side] = asyncio.run(run_searches(dsns[side], s, provider, modes, scope_of))
        touched = asyncio.run(
            shards_touched(
                dsns["cluster"], s, provider, modes, scope_of, groups, args.shard_queries
            )
        )
        cluster_sizes = sizes(worker_dsns(cluster, "bench_cluster"), groups)
        single_sizes = sizes([dsns["single"]], {})
        texts = list(s.queries.values())
        result["probes_ms"] = {
            side: probes(dsns[side], loaded[side], qvec, texts) for side in SIDES
        }
        with tempfile.TemporaryDirectory(prefix="pgrag-citus-bench-") as tmp:
            first = 0 if not rest else rest[0]
            ingest = {}
            for side in SIDES:
                docs = args.ingest_docs
                ingest[side] = asyncio.run(
                    ingest_path(dsns[side], full, first, docs, Path(tmp) / side)
                )
                print(f"{side}: Ingestor {ingest[side]}", flush=True)
        result["load"] = {side: loaded[side].timings for side in SIDES}
        result["ingest_path"] = ingest
        result["search"] = compare(runs, s.qrels)
        for key, shards in touched.items():
            result["search"][key]["cluster_shards"] = shards
        result["sizes"] = {
            "single": single_sizes["0"],
            "single_per_chunk": per_chunk(single_sizes),
            "cluster_shard_groups": cluster_sizes,
            "cluster_per_chunk": per_chunk(cluster_sizes),
        }
    result["wall_s"] = round(time.perf_counter() - started, 1)
    report(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.out} in {result['wall_s']} s")
    return 0


def environment(dsn: str, shard_count: int) -> dict[str, Any]:
    with psycopg.connect(dsn) as conn:
        pg = conn.execute("SELECT current_setting('server_version')").fetchone()
        vec = conn.execute(
            "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    load = Path("/proc/loadavg").read_text().split()[:3]
    return {
        "postgres": pg[0] if pg else None,
        "pgvector": vec[0] if vec else None,
        "citus": "14.0.1",
        "workers": 2,
        "shards": shard_count,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg_at_start": load,
        "nodes": "coordinator and 2 workers on this machine, shared_buffers 64MB each, "
        "fsync off (tests/support/citus.py); `single` is a database on the coordinator's "
        "server without the citus extension",
    }


def report(r: dict[str, Any]) -> None:
    print(f"\n== SciFact test, {r['passages']} passages, {r['queries']} queries, "
          f"{r['collections']} collections; {r['environment']['shards']} shards on 2 workers")  # fmt: skip
    print(f"{'mode/scope':<16} {'nDCG single':>11} {'cluster':>8} {'diff':>7}  "
          f"{'p50 s / c':>15} {'p95 s / c':>15} {'p50 x':>6} {'p95 x':>6} {'shards':>7}")  # fmt: skip
    for key, m in r["search"].items():
        n, lat = m["nDCG@10"], m["latency_ms"]
        shards = m.get("cluster_shards", {}).get("shards_per_query", {})
        print(
            f"{key:<16} {n['single']:11.4f} {n['cluster']:8.4f} {n['diff']:+7.4f}  "
            f"{lat['single']['p50_ms']:7.1f}/{lat['cluster']['p50_ms']:<7.1f} "
            f"{lat['single']['p95_ms']:7.1f}/{lat['cluster']['p95_ms']:<7.1f} "
            f"{m['p50_ratio']:6.2f} {m['p95_ratio']:6.2f} {shards.get('median', '-'):>7}"
        )
    print("ranking SQL alone (pgrag.hybrid_search), ms single / cluster:")
    for key, m in r["search"].items():
        a, b = m["ranking_sql_ms"]["single"], m["ranking_sql_ms"]["cluster"]
        print(
            f"  {key:<16} p50 {a['p50_ms']:7.1f}/{b['p50_ms']:<7.1f} ({m['ranking_p50_ratio']}x)"
            f"  p95 {a['p95_ms']:7.1f}/{b['p95_ms']:<7.1f} ({m['ranking_p95_ratio']}x)"
        )
    for key, m in r["search"].items():
        if not m["equal_within_tolerance"]:
            print(f"NOT EQUAL within {TOLERANCE}: {key} differs by {m['nDCG@10']['diff']:+.4f}; "
                  f"{m['queries_with_other_top10']} queries have another top 10, e.g. "
                  f"{m['first_differing']}")  # fmt: skip
    if all(m["equal_within_tolerance"] for m in r["search"].values()):
        print(f"nDCG@10: cluster equals single within {TOLERANCE} in every mode and scope")
    print(
        "load (bulk COPY + HNSW):", {k: v["chunks_per_s"] for k, v in r["load"].items()}, "chunks/s"
    )
    print(
        "pgrag Ingestor (hash/384):",
        {k: v["chunks_per_s"] for k, v in r["ingest_path"].items()},
        "chunks/s",
    )
    print("bytes per chunk, single:", r["sizes"]["single_per_chunk"])
    print("bytes per chunk, cluster shards:", r["sizes"]["cluster_per_chunk"])
    print("probes ms p50/p95:")
    for name in r["probes_ms"]["single"]:
        a, b = r["probes_ms"]["single"][name], r["probes_ms"]["cluster"][name]
        print(f"  {name:<26} single {a['p50_ms']:6.2f}/{a['p95_ms']:<6.2f} cluster "
              f"{b['p50_ms']:6.2f}/{b['p95_ms']:<6.2f}")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
