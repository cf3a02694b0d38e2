-- How each result's fused score is made up (the console's chart): explain_search's rows with
-- the two terms of the fusion formula that add up to fused_score, so that no caller has to
-- repeat the formula. adaptive: lexical_weight * share * lexical_norm and
-- semantic_weight * (1 - share) * semantic_norm; rrf: weight / (rrf_k + rank) per leg.
--   SELECT * FROM pgrag.explain_parts((SELECT max(id) FROM pgrag.search_log));
CREATE OR REPLACE FUNCTION pgrag.explain_parts(log_id bigint) RETURNS TABLE (
    rank            int,
    chunk_id        bigint,
    fusion          text,
    lexical_part    float8,
    semantic_part   float8,
    fused_score     float8,
    lexical_share   float8,   -- lowered for a chunk in another language than the query's
    semantic_cosine float8,   -- plain cosine; semantic_score is of centred vectors if centred
    centred         boolean,
    query_lang      text,
    chunk_lang      text
)
LANGUAGE sql STABLE AS $$
    SELECT e.rank, e.chunk_id, e.fusion,
           CASE WHEN e.fusion = 'rrf'
                THEN coalesce(coalesce(e.lexical_weight, d.lexical_weight)
                              / (coalesce(e.rrf_k, d.rrf_k) + e.lexical_rank), 0)
                ELSE coalesce(e.lexical_weight, d.lexical_weight) * e.lexical_share
                     * coalesce(e.lexical_norm, 0) END,
           CASE WHEN e.fusion = 'rrf'
                THEN coalesce(coalesce(e.semantic_weight, d.semantic_weight)
                              / (coalesce(e.rrf_k, d.rrf_k) + e.semantic_rank), 0)
                ELSE coalesce(e.semantic_weight, d.semantic_weight) * (1 - e.lexical_share)
                     * coalesce(e.semantic_norm, 0) END,
           e.fused_score, e.lexical_share, e.semantic_cosine, e.centred, e.query_lang,
           e.chunk_lang
    FROM pgrag.explain_search(log_id) e
    CROSS JOIN pgrag.fusion_defaults() d
    ORDER BY e.rank
$$;
