-- Why did a logged search rank what it ranked? Replays it from pgrag.search_log.
--   SELECT * FROM pgrag.explain_search((SELECT max(id) FROM pgrag.search_log));

-- A logged search replayed with its logged ranking options, every field of
-- pgrag.ranking_options read from search_log.params by name (today's defaults,
-- pgrag.ranking_defaults(), for those an older log does not hold)
-- and showing the per-query lexical share, the normalised leg scores behind fused_score and
-- the languages of query and chunk (with whether the semantic score was language-centred)
-- and how close together the chunk holds the query's words (lexical_proximity);
-- semantic_note says when the semantic leg had no vector for the chunk (two-phase ingestion:
-- a document's chunks are searchable by keyword before their vectors are written).
-- A search the rerank stage reordered shows its final order: rank is the logged rerank rank
-- of each candidate reranked (the fused rank for the others), fused_rank the replayed
-- position before reranking, rerank_rank and rerank_score the model's figures.
CREATE OR REPLACE FUNCTION pgrag.explain_search(log_id bigint) RETURNS TABLE (
    rank            int,
    logged_rank     int,
    chunk_id        bigint,
    document_path   text,
    location        text,
    lexical_rank    int,
    lexical_score   float4,
    semantic_rank   int,
    semantic_score  float8,
    fused_score     float8,
    rrf_k           int,
    lexical_weight  float8,
    semantic_weight float8,
    snippet         text,
    fusion          text,
    lexical_share   float8,
    lexical_norm    float8,
    semantic_norm   float8,
    query_lang      text,     -- detected when the search ran
    chunk_lang      text,
    semantic_cosine float8,   -- plain cosine; semantic_score is of centred vectors if centred
    centred         boolean,
    lexical_proximity float8, -- the best window's share of the chunk's matched words
    semantic_note   text,     -- 'no vector' while the chunk's vector is still being computed
    fused_rank      int,      -- rank before reranking (= rank when nothing was reranked)
    rerank_rank     int,
    rerank_score    float8,
    document_context text     -- the document's lead the chunk carries besides its heading
)
LANGUAGE sql STABLE AS $$
    WITH l AS (SELECT * FROM pgrag.search_log WHERE id = log_id),
    p AS (
        SELECT l.*, jsonb_populate_record(pgrag.ranking_defaults(),
                                          jsonb_strip_nulls(l.params)) AS opts
        FROM l
    ),
    logged AS (
        SELECT (r ->> 'chunk_id')::bigint AS chunk_id, (r ->> 'rank')::int AS rank
        FROM p, jsonb_array_elements(p.results) r
    ),
    reranked AS (
        SELECT (x ->> 'chunk_id')::bigint AS chunk_id, (x ->> 'rerank_rank')::int AS rerank_rank,
               (x ->> 'rerank_score')::float8 AS rerank_score
        FROM p, jsonb_array_elements(coalesce(p.rerank, '[]'::jsonb)) x
    ),
    fused AS (
        SELECT f.*, row_number() OVER (ORDER BY f.fused_score DESC, f.chunk_id)::int AS pos
        FROM p CROSS JOIN LATERAL pgrag.hybrid_fusion(
            query_text => p.query,
            query_embedding => CASE WHEN (p.opts).semantic_weight = 0 THEN NULL
                                    ELSE p.query_embedding END,
            collection_ids => (SELECT array_agg(x::bigint) FROM jsonb_array_elements_text(
                                   nullif(p.params -> 'collection_ids', 'null')) x),
            filters => coalesce(p.params -> 'filters', '{}'::jsonb), opts => p.opts,
            min_similarity => (p.params ->> 'min_similarity')::float8,
            embedding_model => p.params ->> 'embedding_model',
            query_lang => p.params ->> 'query_lang') f
    ),
    placed AS (
        SELECT f.*, coalesce(r.rerank_rank, f.pos) AS final_pos, r.rerank_rank, r.rerank_score
        FROM fused f LEFT JOIN reranked r ON r.chunk_id = f.chunk_id
    )
    SELECT h.final_pos, g.rank, h.chunk_id, d.path,
           concat_ws(' ', 'page ' || c.page, 'section ' || c.section, 'sheet ' || c.sheet,
                     'rows ' || c.row_start || '-' || c.row_end, 'slide ' || c.slide),
           h.lexical_rank, h.lexical_score::float4, h.semantic_rank, h.semantic_score,
           h.fused_score, (p.opts).rrf_k, (p.opts).lexical_weight, (p.opts).semantic_weight,
           left(c.content, 120), (p.opts).fusion,
           h.lexical_share, h.lexical_norm, h.semantic_norm,
           p.params ->> 'query_lang', c.lang, h.semantic_cosine, h.centred, h.lexical_proximity,
           CASE WHEN e.chunk_id IS NULL THEN 'no vector' END,
           h.pos, h.rerank_rank, h.rerank_score, c.context
    FROM p
    CROSS JOIN placed h
    JOIN pgrag.chunks c ON c.id = h.chunk_id
    -- collection_id too: on Citus, the shard a chunk and its document share
    JOIN pgrag.documents d ON d.id = c.document_id AND d.collection_id = c.collection_id
    LEFT JOIN logged g ON g.chunk_id = h.chunk_id
    JOIN pgrag.collections col ON col.id = c.collection_id
    LEFT JOIN pgrag.embeddings e
           ON e.collection_id = c.collection_id AND e.set_id = col.active_set_id
          AND e.chunk_id = c.id
    WHERE h.final_pos > coalesce((p.params ->> 'match_offset')::int, 0)
      AND h.final_pos <= coalesce((p.params ->> 'match_offset')::int, 0)
                   + (p.params ->> 'match_count')::int
    ORDER BY h.final_pos, h.pos
$$;
