-- The semantic leg: cosine similarity over pgvector, one partial HNSW index per embedding
-- set (halfvec above 2,000 dimensions), searched with iterative scans so that filters do
-- not starve the pool.

-- The typed expression an embedding set is indexed and queried by.
CREATE OR REPLACE FUNCTION pgrag.embedding_expr(dimensions int) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT CASE WHEN dimensions > 2000 THEN format('embedding::halfvec(%s)', dimensions)
                ELSE format('embedding::vector(%s)', dimensions) END
$$;

CREATE OR REPLACE FUNCTION pgrag.embedding_opclass(dimensions int) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT CASE WHEN dimensions > 2000 THEN 'halfvec_cosine_ops' ELSE 'vector_cosine_ops' END
$$;

-- One HNSW (cosine) index per embedding set; halfvec above 2,000 dimensions.
CREATE OR REPLACE FUNCTION pgrag.ensure_embedding_index(p_set_id bigint) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    dims int;
    idx  text := format('embeddings_hnsw_%s', p_set_id);
BEGIN
    SELECT dimensions INTO dims FROM pgrag.embedding_sets WHERE id = p_set_id;
    IF dims IS NULL THEN
        RAISE EXCEPTION 'no embedding set %', p_set_id USING ERRCODE = 'no_data_found';
    END IF;
    EXECUTE format(
        'CREATE INDEX IF NOT EXISTS %I ON pgrag.embeddings USING hnsw ((%s) %s) '
        'WITH (m = 16, ef_construction = 64) WHERE set_id = %s',
        idx, pgrag.embedding_expr(dims), pgrag.embedding_opclass(dims), p_set_id);
    RETURN idx;
END
$$;

-- The semantic leg of one embedding set, as SQL text. The dimension and set id are
-- interpolated as integers read from pgrag.embedding_sets, so that the planner matches the
-- set's partial HNSW index (a bound parameter would not prove the index predicate).
CREATE OR REPLACE FUNCTION pgrag.semantic_leg_sql(p_set_id bigint, p_dimensions int) RETURNS text
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

-- The semantic leg without document filters needs no join: the embedding set already
-- belongs to one collection. Saves the planning and per-row filter cost on every search.
CREATE OR REPLACE FUNCTION pgrag.semantic_leg_sql(p_set_id bigint, p_dimensions int, p_filtered boolean)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT CASE WHEN p_filtered THEN pgrag.semantic_leg_sql(p_set_id, p_dimensions)
           ELSE format(
               'SELECT e.chunk_id, (%1$s <=> $1::%2$s) AS distance '
               'FROM pgrag.embeddings e WHERE e.set_id = %3$s '
               'ORDER BY %1$s <=> $1::%2$s LIMIT $3',
               pgrag.embedding_expr(p_dimensions),
               CASE WHEN p_dimensions > 2000 THEN format('halfvec(%s)', p_dimensions)
                    ELSE format('vector(%s)', p_dimensions) END,
               p_set_id) END
$$;

CREATE OR REPLACE FUNCTION pgrag.semantic_candidates(
    query_embedding vector,
    pool_size       int DEFAULT 100,
    collection_ids  bigint[] DEFAULT NULL,
    filters         jsonb DEFAULT '{}'::jsonb,
    embedding_model text DEFAULT NULL
) RETURNS TABLE (chunk_id bigint, similarity float8, rank int)
LANGUAGE plpgsql STABLE ROWS 100 AS $$
DECLARE
    s record;
    filtered boolean := coalesce(filters, '{}'::jsonb) <> '{}'::jsonb;
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
            'SELECT chunk_id, 1 - distance, 0 FROM ('
            || pgrag.semantic_leg_sql(s.id, s.dimensions, filtered) || ') leg'
            USING query_embedding, coalesce(filters, '{}'::jsonb), pool_size;
    END LOOP;
END
$$;
