"""What citus.py measures on each side: searches timed whole and their ranking SQL alone, the
shards and remote tasks a search touches, bytes per chunk, and SQL probes."""

from __future__ import annotations

import re
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg
import support
from citus_load import (
    CachedQueries,
    Loaded,
)
from psycopg_pool import AsyncConnectionPool

from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest

LIMIT = 10


WARMUP = 5


PROBE_REPEAT = 60


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
