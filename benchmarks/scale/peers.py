"""The peers' hybrid-search recipes run on pgrag's own tables, for latency at the same size:
Supabase's `hybrid_search` SQL function (supabase.com/docs/guides/ai/hybrid-search) and
pgvector-python's `examples/hybrid_search_rrf.py`, each as its authors wrote it, changed only
where the tables differ:

- their `fts` column / `to_tsvector('english', content)` index is pgrag's stored
  `chunks.tsv` (GIN `chunks_tsv_idx`), so the query is parsed with the same configuration
  (`pgrag.search`, a copy of `english`);
- their `embedding` column is the active set's rows of `pgrag.embeddings`, written as the
  partial HNSW index's expression and predicate so that the planner can use it; Supabase's
  `<#>` (for its `vector_ip_ops` index) is `<=>` here, the same order on normalised vectors;
- neither sets `hnsw.ef_search`, so they run at pgvector's default (40).

Both return ids only, like the pgrag rows of scale.py.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np
import psycopg
import support

# Supabase: per leg the top least(match_count, 30) * 2 by row_number(), full outer join,
# RRF with k = 50 and weights 1 / 1, top least(match_count, 30)
SUPABASE_SQL = """
WITH full_text AS (
    SELECT c.id, row_number() OVER (
        ORDER BY ts_rank_cd(c.tsv, websearch_to_tsquery('pgrag.search', %(query)s)) DESC
    ) AS rank_ix
    FROM pgrag.chunks c
    WHERE c.tsv @@ websearch_to_tsquery('pgrag.search', %(query)s)
    ORDER BY rank_ix
    LIMIT least(%(match_count)s, 30) * 2
), semantic AS (
    SELECT e.chunk_id AS id, row_number() OVER (ORDER BY {expr} <=> %(embedding)s::{cast})
        AS rank_ix
    FROM pgrag.embeddings e
    WHERE e.set_id = {set_id}
    ORDER BY rank_ix
    LIMIT least(%(match_count)s, 30) * 2
)
SELECT c.id
FROM full_text
FULL OUTER JOIN semantic ON full_text.id = semantic.id
JOIN pgrag.chunks c ON coalesce(full_text.id, semantic.id) = c.id
ORDER BY coalesce(1.0 / (50 + full_text.rank_ix), 0.0) * 1
       + coalesce(1.0 / (50 + semantic.rank_ix), 0.0) * 1 DESC
LIMIT least(%(match_count)s, 30)
"""

# pgvector-python: top 20 per leg by RANK(), plainto_tsquery, RRF with k = 60 (the
# example's k), ordered by the summed score; the example's LIMIT 5 is match_count here
PGVECTOR_PYTHON_SQL = """
WITH semantic_search AS (
    SELECT e.chunk_id AS id, RANK () OVER (ORDER BY {expr} <=> %(embedding)s::{cast}) AS rank
    FROM pgrag.embeddings e
    WHERE e.set_id = {set_id}
    ORDER BY {expr} <=> %(embedding)s::{cast}
    LIMIT 20
),
keyword_search AS (
    SELECT c.id, RANK () OVER (ORDER BY ts_rank_cd(c.tsv, query) DESC)
    FROM pgrag.chunks c, plainto_tsquery('pgrag.search', %(query)s) query
    WHERE c.tsv @@ query
    ORDER BY ts_rank_cd(c.tsv, query) DESC
    LIMIT 20
)
SELECT
    COALESCE(semantic_search.id, keyword_search.id) AS id,
    COALESCE(1.0 / (60 + semantic_search.rank), 0.0)
        + COALESCE(1.0 / (60 + keyword_search.rank), 0.0) AS score
FROM semantic_search
FULL OUTER JOIN keyword_search ON semantic_search.id = keyword_search.id
ORDER BY score DESC
LIMIT %(match_count)s
"""

RECIPES = {"supabase_rrf": SUPABASE_SQL, "pgvector_python_rrf": PGVECTOR_PYTHON_SQL}
# How many chunks each recipe's keyword leg matches (capped): both parse the query as an AND
# of its words, so a long question often matches nothing and the recipe is its vector leg.
MATCHES_SQL = {
    "supabase_rrf": "websearch_to_tsquery('pgrag.search', %s)",
    "pgvector_python_rrf": "plainto_tsquery('pgrag.search', %s)",
}
MATCH_CAP = 1000
SET_SQL = (
    "SELECT es.id, es.dimensions, pgrag.embedding_expr(es.dimensions)"
    " FROM pgrag.collections c JOIN pgrag.embedding_sets es ON es.id = c.active_set_id"
    " WHERE c.name = %s"
)


def recipes(conn: psycopg.Connection, collection: str) -> dict[str, str]:
    """Each recipe's statement for the collection's active embedding set."""
    set_id, dims, expr = conn.execute(SET_SQL, (collection,)).fetchone()
    cast = f"halfvec({dims})" if "halfvec" in expr else f"vector({dims})"
    fields = {"expr": f"e.{expr}", "cast": cast, "set_id": set_id}
    return {name: sql.format(**fields) for name, sql in RECIPES.items()}


def measure_peers(
    conn: psycopg.Connection,
    collection: str,
    queries: list[str],
    vectors: np.ndarray,
    ef_search: int | None = None,
) -> dict[str, dict[str, Any]]:
    """p50/p95 of each recipe over the queries (10 results, after 5 warm-up queries), its
    mean hits, the indexes its plan reads and how often its keyword leg matches at all; at
    pgvector's default hnsw.ef_search, and again at `ef_search` (pgrag's, for a like-for-like
    semantic leg) as `NAME@ef_search=N`."""
    out: dict[str, dict[str, Any]] = {}
    runs = [(name, sql, None) for name, sql in recipes(conn, collection).items()]
    if ef_search is not None:
        runs += [(f"{name}@ef_search={ef_search}", sql, ef_search) for name, sql, _ in runs]
    for label, sql, ef in runs:
        conn.execute("RESET hnsw.ef_search" if ef is None else f"SET hnsw.ef_search = {ef:d}")
        name = label.split("@")[0]
        params = [
            {"query": q, "embedding": v, "match_count": 10}
            for q, v in zip(queries, vectors, strict=True)
        ]
        plan = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params[0]).fetchone()[0]
        plan = json.loads(plan) if isinstance(plan, str) else plan
        for p in params[:5]:
            conn.execute(sql, p).fetchall()
        seconds, hits = [], []
        for p in params:
            t = time.perf_counter()
            rows = conn.execute(sql, p).fetchall()
            seconds.append(time.perf_counter() - t)
            hits.append(len(rows))
        matches = [_keyword_matches(conn, name, q) for q in queries]
        out[label] = {
            **support.percentiles_ms(seconds),
            "mean_hits": round(float(np.mean(hits)), 1),
            "plan_indexes": sorted(set(_index_names(plan))),
            "queries_with_keyword_matches": sum(m > 0 for m in matches),
            f"keyword_matches_mean_capped_{MATCH_CAP}": round(float(np.mean(matches)), 1),
        }
        print(f"   {label:<20} {out[label]}", flush=True)
    conn.execute("RESET hnsw.ef_search")
    return out


def _keyword_matches(conn: psycopg.Connection, name: str, query: str) -> int:
    sql = (
        f"SELECT count(*) FROM (SELECT 1 FROM pgrag.chunks c WHERE c.tsv @@ {MATCHES_SQL[name]}"
        f" LIMIT {MATCH_CAP}) m"
    )
    return int(conn.execute(sql, (query,)).fetchone()[0])


def _index_names(node: Any) -> list[str]:
    if isinstance(node, list):
        return [n for x in node for n in _index_names(x)]
    if isinstance(node, dict):
        own = [node["Index Name"]] if "Index Name" in node else []
        return own + [n for v in node.values() for n in _index_names(v)]
    return []
