"""The SQL the search service runs; the ranking itself lives in sql/functions/. The ranking
queries name their columns alike (RankedRow reads them by name) and call the ranking
functions in named notation, the ranking options as one `opts` argument (OPTIONS_SQL), so
an argument or an option added to them shifts nothing here."""

from __future__ import annotations

from collections.abc import Iterable

from psycopg import sql

from pgrag.search.options import OPTIONS_SQL

# what a fused ranking takes besides `opts` (search/ranking.py fills both)
REQUEST_ARGS: tuple[str, ...] = (
    "query_text",
    "query_embedding",
    "match_count",
    "match_offset",
    "collection_ids",
    "filters",
    "min_similarity",
    "embedding_model",
    "query_lang",
)


def _named(names: Iterable[str]) -> sql.Composed:
    """`name => %(name)s, ..., opts => pgrag.ranking_options(...)`: each argument bound by
    its name."""
    return sql.SQL(", ").join(
        [
            *(sql.SQL("{} => {}").format(sql.Identifier(n), sql.Placeholder(n)) for n in names),
            sql.SQL("opts => {}").format(OPTIONS_SQL),
        ]
    )


HYBRID_SQL = sql.SQL(
    """
SELECT rank, chunk_id, document_id, lexical_rank, lexical_score, semantic_rank, semantic_score,
       fused_score, total_candidates AS total
FROM pgrag.hybrid_search({args})
"""
).format(args=_named(REQUEST_ARGS))

# an explained search: the same ranking with each fused score's two terms (RankedRow's
# trailing fields), logged with the search so that its chart needs no replay
HYBRID_PARTS_SQL = sql.SQL(
    """
SELECT d.rank, d.chunk_id, d.document_id, d.lexical_rank, d.lexical_score, d.semantic_rank,
       d.semantic_score, d.fused_score, d.total_candidates AS total, d.fusion_used AS fusion,
       p.lexical_part, p.semantic_part, d.lexical_share, d.semantic_cosine, d.centred
FROM pgrag.hybrid_search_detail({args}) d
CROSS JOIN LATERAL pgrag.fused_parts(
    {opts}, d.lexical_share, d.lexical_norm, d.semantic_norm, d.lexical_rank, d.semantic_rank) p
ORDER BY d.rank
"""
).format(args=_named(REQUEST_ARGS), opts=OPTIONS_SQL)

DOCUMENTS_SQL = sql.SQL(
    """
SELECT rank, best_chunk_id AS chunk_id, document_id, lexical_rank, lexical_score,
       semantic_rank, semantic_score, fused_score, total_documents AS total, chunk_ids
FROM pgrag.hybrid_search_documents({args})
"""
).format(args=_named(REQUEST_ARGS))

# pgrag.regex_search orders by matches, path and chunk position; two collections can hold
# the same path, and such ties came back in a different order from one call to the next
# (pages repeated and skipped hits). The chunk id settles them, so every page of a walk
# reads one ranking.
_REGEX_RANKED = """
WITH ranked AS (
    SELECT row_number() OVER (ORDER BY r.matches DESC, d.path, c.ordinal, r.chunk_id)::int
               AS rank,
           r.chunk_id, r.document_id, r.matches, r.total_candidates
    FROM pgrag.regex_search(%(pattern)s, 2147483647, %(collection_ids)s, %(filters)s, 0) r
    JOIN pgrag.chunks c ON c.id = r.chunk_id
    JOIN pgrag.documents d ON d.id = r.document_id AND d.collection_id = c.collection_id
)"""

REGEX_SQL = (
    _REGEX_RANKED
    + """
SELECT rank, chunk_id, document_id, total_candidates AS total, matches AS regex_matches
FROM ranked
ORDER BY rank
LIMIT %(match_count)s OFFSET %(match_offset)s
"""
)

REGEX_DOCUMENTS_SQL = (
    _REGEX_RANKED
    + """, hits AS (
    SELECT r.*, row_number() OVER (PARTITION BY r.document_id ORDER BY r.rank) AS nth
    FROM ranked r
), docs AS (
    SELECT b.document_id, b.chunk_id, b.rank AS best_rank,
           (SELECT sum(x.matches) FROM hits x WHERE x.document_id = b.document_id)::int AS n,
           (SELECT array_agg(x.chunk_id ORDER BY x.rank) FROM hits x
             WHERE x.document_id = b.document_id AND x.nth <= %(chunks_per_document)s) AS chunk_ids
    FROM hits b WHERE b.nth = 1
)
SELECT row_number() OVER (ORDER BY d.n DESC, d.best_rank)::int AS rank, d.chunk_id,
       d.document_id, count(*) OVER ()::int AS total, d.n AS regex_matches, d.chunk_ids
FROM docs d
ORDER BY d.n DESC, d.best_rank
LIMIT %(match_count)s OFFSET %(match_offset)s
"""
)

# milliseconds, as a literal (SET takes no parameters). A SET statement, not set_config():
# in a scoped transaction Citus passes it on to the workers (sql/functions/10_filters.sql)
LOCAL_STATEMENT_TIMEOUT_SQL = sql.SQL("SET LOCAL statement_timeout = {}")

# 0 when the query is unusable (sql/functions/20_lexical.sql)
LEXICAL_NODES_SQL = "SELECT pgrag.lexical_nodes(%s)"

COLLECTION_IDS_SQL = "SELECT id FROM pgrag.collections WHERE name = %s"

# the hit chunks with their documents and a window of the unit text around each chunk
_CHUNK_DETAILS = sql.SQL(
    """
SELECT c.id, c.document_id::text, d.name, d.path, d.file_type, d.title, d.author,
       d.modified_at, d.outline, c.content, c.char_start, c.char_end, c.page, c.section,
       c.sheet, c.row_start, c.row_end, c.slide, c.heading,
       greatest(c.char_start - %(margin)s, 0) AS base,
       substr(u.body, greatest(c.char_start - %(margin)s, 0) + 1,
              (c.char_end - greatest(c.char_start - %(margin)s, 0)) + %(margin)s) AS window,
       length(u.body) AS body_len, c.lang, c.collection_id, e.chunk_id IS NOT NULL AS has_vector,
       c.context
FROM pgrag.chunks c
-- joined on collection_id too: on Citus, the shard a chunk, its document and unit share
JOIN pgrag.documents d ON d.id = c.document_id AND d.collection_id = c.collection_id
LEFT JOIN pgrag.units u ON u.id = c.unit_id AND u.collection_id = c.collection_id{units_in}
JOIN pgrag.collections col ON col.id = c.collection_id
LEFT JOIN pgrag.embeddings e
       ON e.collection_id = c.collection_id AND e.set_id = col.active_set_id AND e.chunk_id = c.id
WHERE c.id = ANY(%(ids)s){chunks_in}
"""
)


def _in_collections(*tables: str) -> sql.Composed:
    """` AND t.collection_id = ANY(%(collection_ids)s)` for each table."""
    return sql.Composed(
        [
            sql.SQL(" AND {}.collection_id = ANY(%(collection_ids)s::bigint[])").format(
                sql.Identifier(t)
            )
            for t in tables
        ]
    )


CHUNK_DETAILS_SQL = _CHUNK_DETAILS.format(units_in=sql.SQL(""), chunks_in=sql.SQL(""))
# when the search names its collections: on Citus the fetch then goes to their shards only
# (a predicate on each table: Citus does not carry one across a join, and prunes a LEFT
# JOIN's table only on a predicate in its ON clause)
CHUNK_DETAILS_IN_SQL = _CHUNK_DETAILS.format(
    units_in=_in_collections("u"), chunks_in=_in_collections("c", "d")
)

SECRET_SQL = "SELECT secret FROM pgrag.server_secret"

LOG_SQL = """
INSERT INTO pgrag.search_log (query, mode, scope, params, query_embedding, model, degraded,
                              results, timings, caller, rerank_model, rerank_outcome, rerank,
                              rerank_cost, score_parts)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
RETURNING id
"""

# the text of the candidates sent to the rerank model (search/rerank.py)
RERANK_TEXTS_SQL = "SELECT id, content FROM pgrag.chunks WHERE id = ANY(%(ids)s)"
# when the search names its collections: on Citus read on their shards only
RERANK_TEXTS_IN_SQL = RERANK_TEXTS_SQL + " AND collection_id = ANY(%(collection_ids)s::bigint[])"
