"""What scale.py measures besides pgrag's search latency: the semantic leg's HNSW recall@10
against exact search, regex searches without a time limit, and the memory of the PostgreSQL
server's processes."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import psycopg
import support

EF_SWEEP = (40, 100, 200, 400, 600, 800, 1000)
RECALL_TARGET = 0.95
K = 10
# The product's own statement for one set's unfiltered leg (its text, with $1 the query
# vector and $3 the row count), so that the index scan and the exact scan run what the
# search runs.
LEG_TEXT_SQL = """
SELECT pgrag.semantic_leg_sql(es.id, es.dimensions, false, false, es.collection_id)
FROM pgrag.collections c JOIN pgrag.embedding_sets es ON es.id = c.active_set_id
WHERE c.name = %s
"""
# Semantic mode with every shipped default: pool 100, hnsw.ef_search from the set's size
# (pgrag.hnsw_ef_search) and iterative scans
SHIPPED_SQL = (
    "SELECT chunk_id FROM pgrag.hybrid_search(NULL, %(embedding)s, 10,"
    " opts => pgrag.ranking_options(lexical_weight => 0))"
)
SHIPPED_EF_SQL = """
SELECT pgrag.hnsw_ef_search(100, sum(ls.n))
FROM pgrag.language_sums ls
JOIN pgrag.collections c ON c.active_set_id = ls.set_id
WHERE c.name = %s
"""
# Patterns a user searches a corpus of abstracts for: with literal trigrams the trigram
# index finds the candidates; without, every chunk is read.
REGEX_PATTERNS = {
    "literal": r"interleukin-?[0-9]+",
    "percentages": r"[0-9]+(\.[0-9]+)? ?%",
    "e-mail (none)": r"[[:alnum:]._%+-]+@[[:alnum:].-]+\.[[:alpha:]]{2,}",
}
REGEX_SQL = "SELECT max(total_candidates) FROM pgrag.regex_search(%s, 10, filters => %s)"
EXACT = ("SET LOCAL enable_indexscan = off",)
ITERATIVE = "SET LOCAL hnsw.iterative_scan = relaxed_order"


def recall(conn: psycopg.Connection, collection: str, vectors: np.ndarray) -> dict[str, Any]:
    """Recall@10 against exact search (the same leg with index scans disabled) of the
    shipped semantic search, and of the leg's index scan at each ef_search of EF_SWEEP."""
    leg = conn.execute(LEG_TEXT_SQL, (collection,)).fetchone()[0]
    leg_sql = f"SELECT chunk_id FROM ({leg}) leg".replace("$1", "%(embedding)s")
    leg_sql = leg_sql.replace("$3", str(K))
    params = [{"embedding": v} for v in vectors]
    shipped_ef = conn.execute(SHIPPED_EF_SQL, (collection,)).fetchone()[0]
    exact, exact_s = _run_all(conn, leg_sql, params, EXACT)
    shipped, shipped_s = _run_all(conn, SHIPPED_SQL, params, ())
    out: dict[str, Any] = {
        "queries": len(params),
        "exact": {
            "how": "the leg's SQL with SET LOCAL enable_indexscan = off",
            **support.percentiles_ms(exact_s),
        },
        "shipped": {
            "how": "pgrag.hybrid_search semantic mode, shipped defaults (pool 100,"
            f" hnsw.ef_search {shipped_ef} from the set's size, iterative scan relaxed_order)",
            "ef_search": shipped_ef,
            "recall_at_10": _recall(shipped, exact),
            **support.percentiles_ms(shipped_s),
        },
        "sweep_how": "the leg's SQL alone, LIMIT 10, with SET LOCAL hnsw.ef_search and"
        " iterative scan relaxed_order",
        "sweep": {},
    }
    for ef in EF_SWEEP:
        settings = (f"SET LOCAL hnsw.ef_search = {ef}", ITERATIVE)
        _run_all(conn, leg_sql, params[:5], settings)  # warm
        got, secs = _run_all(conn, leg_sql, params, settings)
        out["sweep"][str(ef)] = {
            "recall_at_10": _recall(got, exact),
            **support.percentiles_ms(secs),
        }
    reach = [ef for ef in EF_SWEEP if out["sweep"][str(ef)]["recall_at_10"] >= RECALL_TARGET]
    out[f"min_ef_search_for_{RECALL_TARGET}"] = reach[0] if reach else None
    print(f"   recall {out['shipped']} sweep {out['sweep']}", flush=True)
    return out


def regex(conn: psycopg.Connection, repeats: int = 3) -> dict[str, Any]:
    """Legitimate regex searches with no time limit, over every chunk and within the ~1 %
    folder filter: what PGRAG_REGEX_TIMEOUT_MS must leave room for at this size."""
    from psycopg.types.json import Jsonb

    out: dict[str, Any] = {}
    for name, pattern in REGEX_PATTERNS.items():
        for label, filters in (("no_filter", {}), ("folder_filter", {"folder": "f042"})):
            seconds, matched = [], 0
            for _ in range(repeats):
                t = time.perf_counter()
                matched = conn.execute(REGEX_SQL, (pattern, Jsonb(filters))).fetchone()[0] or 0
                seconds.append(time.perf_counter() - t)
            out[f"{name}/{label}"] = {
                "pattern": pattern,
                "matching_chunks": matched,
                **support.percentiles_ms(seconds),
            }
            print(f"   regex {name:<14} {label:<14} {out[f'{name}/{label}']}", flush=True)
    return out


def _run_all(
    conn: psycopg.Connection, sql: str, params: list[dict[str, Any]], settings: tuple[str, ...]
) -> tuple[list[list[int]], list[float]]:
    ids, seconds = [], []
    for p in params:
        with conn.transaction():
            for s in settings:
                conn.execute(s)
            t = time.perf_counter()
            ids.append([r[0] for r in conn.execute(sql, p).fetchall()])
            seconds.append(time.perf_counter() - t)
    return ids, seconds


def _recall(got: list[list[int]], exact: list[list[int]]) -> float:
    return round(
        float(
            np.mean(
                [len(set(g[:K]) & set(e)) / max(len(e), 1) for g, e in zip(got, exact, strict=True)]
            )
        ),
        4,
    )


class ServerMemory:
    """Peak of the summed RSS and PSS (/proc/PID/smaps_rollup) of the postmaster and its
    children, sampled every `every` seconds in a thread while the block runs. PSS shares
    each shared page (shared_buffers) among the processes that map it, so its sum is the
    server's footprint; the RSS sum counts a shared page once per process."""

    def __init__(self, conn: psycopg.Connection, every: float = 2.0) -> None:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        try:
            postmaster: int | None = _ppid(backend)
            if Path(f"/proc/{postmaster}/comm").read_text().strip() != "postgres":
                postmaster = None
        except OSError:
            postmaster = None  # the server runs elsewhere (--dsn)
        self.postmaster = postmaster
        self.every = every
        self.peak = {"rss_mb": 0.0, "pss_mb": 0.0, "processes": 0}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> ServerMemory:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.every):
                return

    def sample(self) -> None:
        if self.postmaster is None:
            return
        pids = [self.postmaster, *_children(self.postmaster)]
        rss = pss = 0
        for pid in pids:
            kb = _smaps_kb(pid)
            rss += kb.get("Rss", 0)
            pss += kb.get("Pss", 0)
        self.samples += 1
        if pss / 1024 > self.peak["pss_mb"]:
            self.peak = {
                "rss_mb": round(rss / 1024, 1),
                "pss_mb": round(pss / 1024, 1),
                "processes": len(pids),
            }

    def result(self) -> dict[str, Any]:
        if self.postmaster is None:
            return {"error": "not measured: the server's processes are not on this machine"}
        return {
            **self.peak,
            "samples": self.samples,
            "how": f"postmaster + children, summed, sampled every {self.every:g} s; the sample "
            "with the highest PSS",
        }


def _ppid(pid: int) -> int:
    # /proc/PID/stat: "pid (comm) state ppid ...", comm may hold spaces and parentheses
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _children(parent: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if _ppid(int(d.name)) == parent:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
    return out


def _smaps_kb(pid: int) -> dict[str, int]:
    try:
        lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines[1:]:
        key, _, rest = line.partition(":")
        if rest.strip().endswith("kB"):
            out[key] = int(rest.split()[0])
    return out
