-- How each result's fused score is made up (the console's chart): the two terms of the
-- fusion formula that add up to fused_score, so that no caller has to repeat the formula.
-- adaptive: lexical_weight * share * lexical_norm and
-- semantic_weight * (1 - share) * semantic_norm; rrf: weight / (rrf_k + rank) per leg,
-- with the fusion, weights and rrf_k of `opts`.
CREATE OR REPLACE FUNCTION pgrag.fused_parts(
    opts            pgrag.ranking_options,
    lexical_share   float8,
    lexical_norm    float8,
    semantic_norm   float8,
    lexical_rank    int,
    semantic_rank   int,
    OUT lexical_part  float8,
    OUT semantic_part float8
)
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN (opts).fusion = 'rrf'
                THEN coalesce((opts).lexical_weight / ((opts).rrf_k + lexical_rank), 0)
                ELSE (opts).lexical_weight * lexical_share * coalesce(lexical_norm, 0) END,
           CASE WHEN (opts).fusion = 'rrf'
                THEN coalesce((opts).semantic_weight / ((opts).rrf_k + semantic_rank), 0)
                ELSE (opts).semantic_weight * (1 - lexical_share) * coalesce(semantic_norm, 0)
           END
$$;

-- A logged search's results with their score parts: those the search logged (explained
-- searches, search_log.score_parts), else the search replayed (pgrag.explain_search).
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
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT s.rank, s.chunk_id, s.fusion, s.lexical_part, s.semantic_part, s.fused_score,
           s.lexical_share, s.semantic_cosine, s.centred, l.params ->> 'query_lang', s.chunk_lang
    FROM pgrag.search_log l
    CROSS JOIN jsonb_to_recordset(l.score_parts) AS s(
        rank int, chunk_id bigint, fusion text, lexical_part float8, semantic_part float8,
        fused_score float8, lexical_share float8, semantic_cosine float8, centred boolean,
        chunk_lang text)
    WHERE l.id = log_id
    ORDER BY s.rank;
    IF NOT FOUND THEN
        RETURN QUERY
        SELECT e.rank, e.chunk_id, e.fusion, p.lexical_part, p.semantic_part, e.fused_score,
               e.lexical_share, e.semantic_cosine, e.centred, e.query_lang, e.chunk_lang
        FROM pgrag.explain_search(log_id) e
        CROSS JOIN LATERAL pgrag.fused_parts(
            opts => pgrag.ranking_options(fusion => e.fusion, rrf_k => e.rrf_k,
                                          lexical_weight => e.lexical_weight,
                                          semantic_weight => e.semantic_weight),
            lexical_share => e.lexical_share, lexical_norm => e.lexical_norm,
            semantic_norm => e.semantic_norm, lexical_rank => e.lexical_rank,
            semantic_rank => e.semantic_rank) p
        ORDER BY e.rank;
    END IF;
END
$$;
