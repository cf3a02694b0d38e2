-- Hybrid search: the two legs fused in SQL.
--
-- fusion => 'adaptive' (the default): a convex combination of max-normalised BM25 and
-- min-max-normalised cosine similarity over the two pools, with a per-query lexical share
-- from how much of the query the best lexical hit covers:
--   coverage  = sum(idf of query terms in the top lexical chunk) / sum(idf of all query terms)
--   share     = least(max_lexical_share, coverage_gain * coverage)
--               (1 when the semantic pool is empty, 0 when the lexical pool is empty)
--               and per chunk share * coverage^6 for a chunk outside the lexical pool whose
--               language is not the query's: the query's words cannot occur in it, so it
--               is held back only as far as they found a chunk holding them all (an exact
--               match keeps the full share; common words of the query's language found in
--               unrelated text do not hold back the other-language answer). xquad-mixed
--               (question in the other language than its paragraph), the office-document
--               benchmark and the other powers tried: benchmarks/README.md ("Mixed languages").
--   near      = 1 - proximity_weight + proximity_weight * proximity  (pgrag.lexical_candidates:
--               1 when one sentence or row holds all the chunk's matched words)
--   fused     = lexical_weight  * share       * lexical_score * near / max(lexical_score * near)
--             + semantic_weight * (1 - share) * (sim - min(sim)) / (max(sim) - min(sim))
-- Defaults coverage_gain 1.2, max_lexical_share 0.8 were chosen on SciFact train and held
-- across xquad-zh, xquad-en2zh and cmrc2018-dev (every value in 1.0-1.3 x 0.75-0.85 kept
-- hybrid >= the best single leg). Plain RRF lets a leg without signal drag a good one down
-- (XQuAD en->zh: English questions, Chinese passages). fusion => 'rrf':
--   fused = lexical_weight / (rrf_k + lexical_rank) + semantic_weight / (rrf_k + semantic_rank)
--
-- The four functions take the ranking options as one argument, `opts` (type
-- pgrag.ranking_options, migration 0033; pgrag.ranking_defaults() when omitted), pass it on
-- whole, and call one another in named notation only, so an argument added to them shifts
-- nothing.
--
-- From psql:
--   SELECT * FROM pgrag.hybrid_search('contract signing', '[...]'::vector, 5);
--   SELECT * FROM pgrag.hybrid_search('contract signing', '[...]'::vector, 5,
--                                     opts => pgrag.ranking_options(fusion => 'rrf'));
--   SELECT * FROM pgrag.hybrid_search_detail('contract signing', '[...]'::vector, 5);
--   SELECT * FROM pgrag.hybrid_fusion('contract signing', '[...]'::vector);  -- unranked pool

CREATE OR REPLACE FUNCTION pgrag.check_fusion(fusion text) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF fusion IS NULL OR fusion NOT IN ('adaptive', 'rrf') THEN
        RAISE EXCEPTION 'unknown fusion %: use adaptive or rrf', fusion
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN fusion;
END
$$;

-- The fused pool with every term of the formula, unranked: what hybrid_search orders, and
-- what a DBA reads to see why a chunk ranked where it did.
CREATE OR REPLACE FUNCTION pgrag.hybrid_fusion(
    query_text      text,
    query_embedding vector,
    collection_ids  bigint[] DEFAULT NULL,
    filters         jsonb DEFAULT '{}'::jsonb,
    opts            pgrag.ranking_options DEFAULT pgrag.ranking_defaults(),
    min_similarity  float8 DEFAULT NULL,
    embedding_model text DEFAULT NULL,
    query_lang      text DEFAULT NULL
) RETURNS TABLE (
    chunk_id         bigint,
    lexical_rank     int,
    lexical_score    float8,  -- BM25
    lexical_norm     float8,  -- lexical_score * near / best lexical_score * near
    lexical_coverage float8,  -- of this chunk; the share uses the top chunk's
    semantic_rank    int,
    semantic_score   float8,  -- cosine similarity
    semantic_norm    float8,  -- min-max over the semantic pool
    lexical_share    float8,  -- per query; NULL with fusion => 'rrf'
    fused_score      float8,
    semantic_cosine  float8,  -- plain cosine similarity (semantic_score is it unless centred)
    chunk_lang       text,
    centred          boolean, -- semantic_score compares language-centred vectors
    lexical_proximity float8  -- best window's share of the chunk's matched words
)
LANGUAGE plpgsql STABLE ROWS 200
SET plan_cache_mode = force_generic_plan  -- plan once per session, not per call
AS $$
#variable_conflict use_column
DECLARE
    lexical_opts pgrag.ranking_options := opts;
BEGIN
    IF opts.proximity_weight = 0 THEN
        lexical_opts.proximity_width := 0;  -- no weight, no windows to compute
    END IF;
    RETURN QUERY
    WITH lexical AS MATERIALIZED (
        SELECT l.*,
               l.score * (1 - opts.proximity_weight + opts.proximity_weight * l.proximity) AS near
        FROM pgrag.lexical_candidates(query_text => query_text,
                                      collection_ids => collection_ids, filters => filters,
                                      opts => lexical_opts) l
        WHERE query_text IS NOT NULL AND opts.lexical_weight <> 0
    ),
    semantic AS MATERIALIZED (
        SELECT sc.chunk_id, sc.similarity AS score, sc.cosine, sc.lang, sc.centred,
               row_number() OVER (ORDER BY sc.similarity DESC, sc.chunk_id)::int AS rank
        FROM pgrag.semantic_candidates(query_embedding => query_embedding,
                                       pool_size => opts.pool_size,
                                       collection_ids => collection_ids, filters => filters,
                                       embedding_model => embedding_model,
                                       query_lang => query_lang) sc
        WHERE query_embedding IS NOT NULL AND opts.semantic_weight <> 0
        ORDER BY sc.similarity DESC, sc.chunk_id
        LIMIT opts.pool_size
    ),
    q AS (
        SELECT pgrag.check_fusion(opts.fusion) AS fusion,
               (SELECT max(near) FROM lexical) AS lmax,
               (SELECT max(score) FROM semantic) AS smax,
               (SELECT min(score) FROM semantic) AS smin,
               CASE WHEN NOT EXISTS (SELECT 1 FROM semantic) THEN 1.0
                    WHEN NOT EXISTS (SELECT 1 FROM lexical) THEN 0.0
                    ELSE least(opts.max_lexical_share,
                               opts.coverage_gain * (SELECT coverage FROM lexical WHERE rank = 1))
               END AS share,
               coalesce((SELECT coverage FROM lexical WHERE rank = 1), 0) AS coverage
    ),
    joined AS (
        SELECT coalesce(l.chunk_id, s.chunk_id) AS id, l.rank AS lrank, l.score AS lscore,
               l.near / nullif(q.lmax, 0) AS lnorm, l.coverage, l.proximity,
               s.rank AS srank, s.score AS sscore,
               CASE WHEN s.chunk_id IS NULL THEN NULL
                    WHEN q.smax > q.smin THEN (s.score - q.smin) / (q.smax - q.smin)
                    ELSE 1.0 END AS snorm,
               -- a chunk in a language the query's words cannot match is held back only
               -- as far as the query's words found a chunk holding them all
               CASE WHEN query_lang IS NOT NULL AND l.chunk_id IS NULL
                         AND s.lang NOT IN (query_lang, 'und') THEN q.share * q.coverage ^ 6
                    ELSE q.share END AS share,
               q.fusion, s.cosine, s.lang, s.centred
        FROM lexical l
        FULL JOIN semantic s ON s.chunk_id = l.chunk_id
        CROSS JOIN q
        WHERE min_similarity IS NULL OR s.score >= min_similarity
    )
    SELECT j.id, j.lrank, j.lscore, j.lnorm, j.coverage, j.srank, j.sscore, j.snorm,
           CASE WHEN j.fusion = 'adaptive' THEN j.share END,
           CASE WHEN j.fusion = 'rrf'
                THEN coalesce(opts.lexical_weight / (opts.rrf_k + j.lrank), 0)
                   + coalesce(opts.semantic_weight / (opts.rrf_k + j.srank), 0)
                ELSE opts.lexical_weight * j.share * coalesce(j.lnorm, 0)
                   + opts.semantic_weight * (1 - j.share) * coalesce(j.snorm, 0) END,
           j.cosine, j.lang, j.centred, j.proximity
    FROM joined j;
END
$$;

-- The ranked page with the terms of the formula: hybrid_search's columns, then the fusion,
-- the per-query lexical share and both normalised leg scores, so that a caller (--explain)
-- can show fused_score = lexical_weight * share * lexical_norm
--                      + semantic_weight * (1 - share) * semantic_norm.
CREATE OR REPLACE FUNCTION pgrag.hybrid_search_detail(
    query_text      text,
    query_embedding vector,
    match_count     int DEFAULT 10,
    collection_ids  bigint[] DEFAULT NULL,
    filters         jsonb DEFAULT '{}'::jsonb,
    opts            pgrag.ranking_options DEFAULT pgrag.ranking_defaults(),
    min_similarity  float8 DEFAULT NULL,
    embedding_model text DEFAULT NULL,
    match_offset    int DEFAULT 0,
    query_lang      text DEFAULT NULL
) RETURNS TABLE (
    rank             int,
    chunk_id         bigint,
    document_id      uuid,
    lexical_rank     int,
    lexical_score    float4,
    semantic_rank    int,
    semantic_score   float8,
    fused_score      float8,
    total_candidates int,
    fusion_used      text,
    lexical_share    float8,
    lexical_norm     float8,
    semantic_norm    float8,
    semantic_cosine  float8,
    chunk_lang       text,
    centred          boolean,
    lexical_proximity float8
)
LANGUAGE sql STABLE AS $$
    WITH ranked AS (
        SELECT f.*, row_number() OVER (ORDER BY f.fused_score DESC, f.chunk_id)::int AS pos,
               count(*) OVER ()::int AS total
        FROM pgrag.hybrid_fusion(
            query_text => hybrid_search_detail.query_text,
            query_embedding => hybrid_search_detail.query_embedding,
            collection_ids => hybrid_search_detail.collection_ids,
            filters => hybrid_search_detail.filters, opts => hybrid_search_detail.opts,
            min_similarity => hybrid_search_detail.min_similarity,
            embedding_model => hybrid_search_detail.embedding_model,
            query_lang => hybrid_search_detail.query_lang) f
    )
    SELECT r.pos, r.chunk_id,
           c.document_id,
           r.lexical_rank, r.lexical_score::float4, r.semantic_rank, r.semantic_score,
           r.fused_score, r.total,
           (hybrid_search_detail.opts).fusion,
           r.lexical_share, r.lexical_norm, r.semantic_norm,
           r.semantic_cosine, r.chunk_lang, r.centred, r.lexical_proximity
    -- each hit's document from its chunk, in the scope's collections: routed to their
    -- shards on Citus (pgrag.chunks_by_id; docs/scale-out.md)
    FROM ranked r
    JOIN pgrag.chunks_by_id(ids => ARRAY(SELECT x.chunk_id FROM ranked x),
                            collection_ids => hybrid_search_detail.collection_ids,
                            with_tsv => false) c
      ON c.id = r.chunk_id
    ORDER BY r.pos
    LIMIT hybrid_search_detail.match_count OFFSET hybrid_search_detail.match_offset
$$;

-- The ranked page: chunks with both ranks, both raw scores (BM25, cosine similarity) and
-- the fused score.
CREATE OR REPLACE FUNCTION pgrag.hybrid_search(
    query_text      text,
    query_embedding vector,
    match_count     int DEFAULT 10,
    collection_ids  bigint[] DEFAULT NULL,
    filters         jsonb DEFAULT '{}'::jsonb,
    opts            pgrag.ranking_options DEFAULT pgrag.ranking_defaults(),
    min_similarity  float8 DEFAULT NULL,
    embedding_model text DEFAULT NULL,
    match_offset    int DEFAULT 0,
    query_lang      text DEFAULT NULL
) RETURNS TABLE (
    rank             int,     -- final position, 1-based
    chunk_id         bigint,
    document_id      uuid,
    lexical_rank     int,     -- NULL: not in the lexical pool
    lexical_score    float4,  -- BM25
    semantic_rank    int,     -- NULL: not in the semantic pool
    semantic_score   float8,  -- cosine similarity (of language-centred vectors, see 30_semantic)
    fused_score      float8,
    total_candidates int      -- rows in the fused pool (before limit and offset)
)
LANGUAGE sql STABLE AS $$
    SELECT d.rank, d.chunk_id, d.document_id, d.lexical_rank, d.lexical_score,
           d.semantic_rank, d.semantic_score, d.fused_score, d.total_candidates
    FROM pgrag.hybrid_search_detail(
        query_text => hybrid_search.query_text,
        query_embedding => hybrid_search.query_embedding,
        collection_ids => hybrid_search.collection_ids, filters => hybrid_search.filters,
        match_count => hybrid_search.match_count, match_offset => hybrid_search.match_offset,
        opts => hybrid_search.opts, min_similarity => hybrid_search.min_similarity,
        embedding_model => hybrid_search.embedding_model,
        query_lang => hybrid_search.query_lang) d
$$;

-- Documents ranked by their best chunk (scope => 'documents'): one row per document.
CREATE OR REPLACE FUNCTION pgrag.hybrid_search_documents(
    query_text      text,
    query_embedding vector,
    match_count     int DEFAULT 10,
    collection_ids  bigint[] DEFAULT NULL,
    filters         jsonb DEFAULT '{}'::jsonb,
    opts            pgrag.ranking_options DEFAULT pgrag.ranking_defaults(),
    min_similarity  float8 DEFAULT NULL,
    embedding_model text DEFAULT NULL,
    match_offset    int DEFAULT 0,
    query_lang      text DEFAULT NULL
) RETURNS TABLE (
    rank            int,
    document_id     uuid,
    best_chunk_id   bigint,
    chunk_ids       bigint[],
    lexical_rank    int,
    lexical_score   float4,
    semantic_rank   int,
    semantic_score  float8,
    fused_score     float8,
    total_documents int
)
LANGUAGE sql STABLE AS $$
    WITH hits AS (
        SELECT h.*, row_number() OVER (PARTITION BY h.document_id ORDER BY h.rank) AS nth
        -- the arguments qualified: a bare name would read a column of the same name
        FROM pgrag.hybrid_search(
                 match_count => (hybrid_search_documents.opts).pool_size * 2, match_offset => 0,
                 query_text => hybrid_search_documents.query_text,
                 query_embedding => hybrid_search_documents.query_embedding,
                 collection_ids => hybrid_search_documents.collection_ids,
                 filters => hybrid_search_documents.filters,
                 opts => hybrid_search_documents.opts,
                 min_similarity => hybrid_search_documents.min_similarity,
                 embedding_model => hybrid_search_documents.embedding_model,
                 query_lang => hybrid_search_documents.query_lang) h
    ),
    docs AS (
        SELECT b.document_id, b.chunk_id AS best, b.lexical_rank, b.lexical_score,
               b.semantic_rank, b.semantic_score, b.fused_score, b.rank AS best_rank,
               (SELECT array_agg(x.chunk_id ORDER BY x.rank) FROM hits x
                 WHERE x.document_id = b.document_id
                   AND x.nth <= (hybrid_search_documents.opts).chunks_per_document)
               AS chunk_ids
        FROM hits b
        WHERE b.nth = 1
    )
    SELECT row_number() OVER (ORDER BY d.best_rank)::int, d.document_id, d.best, d.chunk_ids,
           d.lexical_rank, d.lexical_score, d.semantic_rank, d.semantic_score, d.fused_score,
           count(*) OVER ()::int
    FROM docs d
    ORDER BY d.best_rank
    LIMIT hybrid_search_documents.match_count OFFSET hybrid_search_documents.match_offset
$$;
