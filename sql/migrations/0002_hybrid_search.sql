-- Hybrid search: lexical (tsvector, ts_rank_cd) and semantic (HNSW, cosine) legs fused with
-- reciprocal rank fusion, in one statement per embedding set. Callable from psql:
--
--   SELECT * FROM pgrag.hybrid_search('contract signing', '[0.1, ...]'::vector, match_count => 5);
--
-- Each row says where it ranked in each leg (NULL = not in that leg's pool), the raw leg
-- scores and the fused score:
--   fused = lexical_weight / (rrf_k + lexical_rank) + semantic_weight / (rrf_k + semantic_rank)

-- The semantic leg of one embedding set, as SQL text. The dimension and set id are
-- interpolated as integers read from pgrag.embedding_sets, so that the planner matches the
-- set's partial HNSW index (a bound parameter would not prove the index predicate).
CREATE FUNCTION pgrag.semantic_leg_sql(p_set_id bigint, p_dimensions int) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT format(
        'SELECT e.chunk_id, (%1$s <=> $1::%2$s) AS distance '
        'FROM pgrag.embeddings e '
        'JOIN pgrag.chunks c ON c.id = e.chunk_id '
        'JOIN pgrag.documents d ON d.id = c.document_id '
        'WHERE e.set_id = %3$s AND pgrag.document_matches(d, $2) '
        'ORDER BY %1$s <=> $1::%2$s LIMIT $3',
        pgrag.embedding_expr(p_dimensions),
        CASE WHEN p_dimensions > 2000 THEN format('halfvec(%s)', p_dimensions)
             ELSE format('vector(%s)', p_dimensions) END,
        p_set_id)
$$;

-- Semantic candidates over the active embedding sets of the chosen collections (all when
-- NULL) whose model matches: (chunk_id, cosine similarity, rank).
CREATE FUNCTION pgrag.semantic_candidates(
    query_embedding vector,
    pool_size       int DEFAULT 100,
    collection_ids  bigint[] DEFAULT NULL,
    filters         jsonb DEFAULT '{}'::jsonb,
    embedding_model text DEFAULT NULL
) RETURNS TABLE (chunk_id bigint, similarity float8, rank int)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    s record;
BEGIN
    -- iterative scans keep filtered queries at pool_size rows (pgvector >= 0.8)
    PERFORM set_config('hnsw.iterative_scan', 'relaxed_order', true);
    PERFORM set_config('hnsw.ef_search', greatest(pool_size, 40)::text, true);
    FOR s IN
        SELECT es.id, es.dimensions
        FROM pgrag.collections col
        JOIN pgrag.embedding_sets es ON es.id = col.active_set_id
        WHERE (collection_ids IS NULL OR col.id = ANY (collection_ids))
          AND (embedding_model IS NULL OR es.model = embedding_model)
          AND es.dimensions = vector_dims(query_embedding)
    LOOP
        RETURN QUERY EXECUTE
            'SELECT chunk_id, 1 - distance, 0 FROM (' || pgrag.semantic_leg_sql(s.id, s.dimensions) || ') leg'
            USING query_embedding, coalesce(filters, '{}'::jsonb), pool_size;
    END LOOP;
END
$$;

CREATE FUNCTION pgrag.hybrid_search(
    query_text      text,
    query_embedding vector,
    match_count     int DEFAULT 10,
    collection_ids  bigint[] DEFAULT NULL,
    filters         jsonb DEFAULT '{}'::jsonb,
    rrf_k           int DEFAULT 60,
    lexical_weight  float8 DEFAULT 1.0,
    semantic_weight float8 DEFAULT 1.0,
    pool_size       int DEFAULT 100,
    min_similarity  float8 DEFAULT NULL,
    embedding_model text DEFAULT NULL,
    match_offset    int DEFAULT 0
) RETURNS TABLE (
    rank             int,     -- final position, 1-based
    chunk_id         bigint,
    document_id      uuid,
    lexical_rank     int,     -- NULL: not in the lexical pool
    lexical_score    float4,  -- ts_rank_cd
    semantic_rank    int,     -- NULL: not in the semantic pool
    semantic_score   float8,  -- cosine similarity
    fused_score      float8,
    total_candidates int      -- rows in the fused pool (before limit and offset)
)
LANGUAGE sql STABLE AS $$
    WITH q AS (
        SELECT CASE WHEN query_text IS NULL OR lexical_weight = 0 THEN NULL
                    ELSE pgrag.lexical_query(query_text) END AS tsq
    ),
    lexical AS (
        SELECT c.id, ts_rank_cd(c.tsv, q.tsq) AS score,
               row_number() OVER (ORDER BY ts_rank_cd(c.tsv, q.tsq) DESC, c.id)::int AS rank
        FROM q, pgrag.chunks c
        JOIN pgrag.documents d ON d.id = c.document_id
        WHERE q.tsq IS NOT NULL
          AND c.tsv @@ q.tsq
          AND (collection_ids IS NULL OR c.collection_id = ANY (collection_ids))
          AND pgrag.document_matches(d, filters)
        ORDER BY score DESC, c.id
        LIMIT pool_size
    ),
    semantic AS (
        SELECT sc.chunk_id AS id, sc.similarity AS score,
               row_number() OVER (ORDER BY sc.similarity DESC, sc.chunk_id)::int AS rank
        FROM pgrag.semantic_candidates(query_embedding, pool_size, collection_ids, filters,
                                       embedding_model) sc
        WHERE query_embedding IS NOT NULL AND semantic_weight <> 0
        ORDER BY sc.similarity DESC, sc.chunk_id
        LIMIT pool_size
    ),
    fused AS (
        SELECT coalesce(l.id, s.id) AS id, l.rank AS lrank, l.score AS lscore,
               s.rank AS srank, s.score AS sscore,
               coalesce(lexical_weight / (rrf_k + l.rank), 0)
             + coalesce(semantic_weight / (rrf_k + s.rank), 0) AS fused
        FROM lexical l
        FULL JOIN semantic s ON s.id = l.id
        WHERE min_similarity IS NULL OR s.score >= min_similarity
    ),
    ranked AS (
        SELECT f.*, row_number() OVER (ORDER BY f.fused DESC, f.id)::int AS pos,
               count(*) OVER ()::int AS total
        FROM fused f
    )
    SELECT r.pos, r.id, c.document_id, r.lrank, r.lscore, r.srank, r.sscore, r.fused, r.total
    FROM ranked r
    JOIN pgrag.chunks c ON c.id = r.id
    ORDER BY r.pos
    LIMIT match_count OFFSET match_offset
$$;
