"""The SQL the search service runs; the ranking itself lives in sql/functions/."""

_HYBRID_ARGS = """
    %(query)s, %(embedding)s, %(match_count)s, %(collection_ids)s, %(filters)s, %(rrf_k)s,
    %(lexical_weight)s, %(semantic_weight)s, %(pool_size)s, %(min_similarity)s,
    %(embedding_model)s, %(match_offset)s, %(fusion)s, %(coverage_gain)s,
    %(max_lexical_share)s, %(query_lang)s, %(proximity_weight)s, bm25_k1 => %(bm25_k1)s,
    bm25_b => %(bm25_b)s, candidate_budget => %(candidate_budget)s,
    rescore_size => %(rescore_size)s"""

HYBRID_SQL = f"""
SELECT rank, chunk_id, document_id, lexical_rank, lexical_score, semantic_rank, semantic_score,
       fused_score, total_candidates, NULL::int AS regex_matches, NULL::bigint[] AS chunk_ids
FROM pgrag.hybrid_search({_HYBRID_ARGS})
"""

# an explained search: the same ranking with each fused score's two terms (RankedRow's
# trailing fields), logged with the search so that its chart needs no replay
HYBRID_PARTS_SQL = f"""
SELECT d.rank, d.chunk_id, d.document_id, d.lexical_rank, d.lexical_score, d.semantic_rank,
       d.semantic_score, d.fused_score, d.total_candidates, NULL::int, NULL::bigint[],
       d.fusion_used, p.lexical_part, p.semantic_part, d.lexical_share, d.semantic_cosine,
       d.centred
FROM pgrag.hybrid_search_detail({_HYBRID_ARGS}) d
CROSS JOIN LATERAL pgrag.fused_parts(
    d.fusion_used, %(lexical_weight)s::float8, %(semantic_weight)s::float8, %(rrf_k)s::int,
    d.lexical_share, d.lexical_norm, d.semantic_norm, d.lexical_rank, d.semantic_rank) p
ORDER BY d.rank
"""

DOCUMENTS_SQL = """
SELECT rank, best_chunk_id, document_id, lexical_rank, lexical_score, semantic_rank,
       semantic_score, fused_score, total_documents, NULL::int, chunk_ids
FROM pgrag.hybrid_search_documents(
    %(query)s, %(embedding)s, %(match_count)s, %(collection_ids)s, %(filters)s, %(rrf_k)s,
    %(lexical_weight)s, %(semantic_weight)s, %(pool_size)s, %(min_similarity)s,
    %(embedding_model)s, %(match_offset)s, %(chunks_per_document)s, %(fusion)s,
    %(coverage_gain)s, %(max_lexical_share)s, %(query_lang)s, %(proximity_weight)s,
    bm25_k1 => %(bm25_k1)s, bm25_b => %(bm25_b)s, candidate_budget => %(candidate_budget)s,
    rescore_size => %(rescore_size)s)
"""

# the ranking defaults, once (sql/functions/40_hybrid.sql)
FUSION_DEFAULTS_SQL = "SELECT * FROM pgrag.fusion_defaults()"

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
SELECT rank, chunk_id, document_id, NULL::int, NULL::float4, NULL::int, NULL::float8,
       NULL::float8, total_candidates, matches, NULL::bigint[]
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
SELECT row_number() OVER (ORDER BY d.n DESC, d.best_rank)::int, d.chunk_id, d.document_id,
       NULL::int, NULL::float4, NULL::int, NULL::float8, NULL::float8, count(*) OVER ()::int,
       d.n, d.chunk_ids
FROM docs d
ORDER BY d.n DESC, d.best_rank
LIMIT %(match_count)s OFFSET %(match_offset)s
"""
)

# 0 when the query is unusable (sql/functions/20_lexical.sql)
LEXICAL_NODES_SQL = "SELECT pgrag.lexical_nodes(%s)"

COLLECTION_IDS_SQL = "SELECT id FROM pgrag.collections WHERE name = %s"

# the hit chunks with their documents and a window of the unit text around each chunk
CHUNK_DETAILS_SQL = """
SELECT c.id, c.document_id::text, d.name, d.path, d.file_type, d.title, d.author,
       d.modified_at, d.outline, c.content, c.char_start, c.char_end, c.page, c.section,
       c.sheet, c.row_start, c.row_end, c.slide, c.heading,
       greatest(c.char_start - %(margin)s, 0) AS base,
       substr(u.body, greatest(c.char_start - %(margin)s, 0) + 1,
              (c.char_end - greatest(c.char_start - %(margin)s, 0)) + %(margin)s) AS window,
       length(u.body) AS body_len, c.lang, c.collection_id, e.chunk_id IS NOT NULL AS has_vector
FROM pgrag.chunks c
-- joined on collection_id too: on Citus, the shard a chunk, its document and unit share
JOIN pgrag.documents d ON d.id = c.document_id AND d.collection_id = c.collection_id
LEFT JOIN pgrag.units u ON u.id = c.unit_id AND u.collection_id = c.collection_id
JOIN pgrag.collections col ON col.id = c.collection_id
LEFT JOIN pgrag.embeddings e
       ON e.collection_id = c.collection_id AND e.set_id = col.active_set_id AND e.chunk_id = c.id
WHERE c.id = ANY(%(ids)s)
"""
# when the search names its collections: on Citus the fetch then goes to their shards only
# (a predicate on each table: Citus does not carry one across a join, and prunes a LEFT
# JOIN's table only on a predicate in its ON clause)
CHUNK_DETAILS_IN_SQL = CHUNK_DETAILS_SQL.replace(
    "u.collection_id = c.collection_id",
    "u.collection_id = c.collection_id AND u.collection_id = ANY(%(collection_ids)s::bigint[])",
) + (
    "  AND c.collection_id = ANY(%(collection_ids)s::bigint[])\n"
    "  AND d.collection_id = ANY(%(collection_ids)s::bigint[])\n"
)

SECRET_SQL = "SELECT secret FROM pgrag.server_secret"

LOG_SQL = """
INSERT INTO pgrag.search_log (query, mode, scope, params, query_embedding, model, degraded,
                              results, timings, caller, score_parts)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
RETURNING id
"""
