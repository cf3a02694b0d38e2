-- The semantic leg: cosine similarity over pgvector, one partial HNSW index per embedding
-- set (halfvec above 2,000 dimensions), searched with iterative scans so that filters do
-- not starve the pool.
--
-- Language-neutral similarity. A multilingual model ranks any same-language text above
-- the other-language text that answers (xquad-mixed, question in the other language than
-- its paragraph: nDCG@10 0.10 by plain cosine). When an embedding set holds at least two
-- languages with min_chunks chunks each, a chunk's similarity is its cosine moved by the
-- gap between the languages' mean vectors as the query sees it:
--   similarity = q.d - q.mean(lang(d)) + q.mean(lang(q))          (q, d unit vectors)
-- so chunks in the query's language keep their plain cosine and order exactly, and a chunk
-- in another language is compared as if it were in the query's. mean(L) = sum of the set's
-- vectors in L / their number (pgrag.language_sums, kept by triggers on pgrag.embeddings:
-- means follow every insert and delete, for any model, without re-embedding); a language
-- with fewer than min_chunks chunks, `und` (no words) and a query language the set lacks
-- use the mean of the whole set. Candidates come per language from the HNSW index (plain
-- cosine order, exact within a language). Measured (benchmarks/quality.py, xquad-mixed):
-- cross-lingual 0.10 -> 0.75, same language 0.979 -> 0.960. Centring both sides,
-- cos(q - mean(lang q), d - mean(lang d)), reaches 0.79 / 0.969 (benchmarks/language_study.py)
-- but reorders results within one language (seed 004's "financial performance Q1" lost a Q1
-- document) and turns near-duplicate chunks around their mean into noise.
-- With one language the plain cosine is used, exactly as before.
-- `cosine` (the plain similarity) is what min_similarity thresholds.

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

-- v * f, element by element (pgvector has no scalar product).
CREATE OR REPLACE FUNCTION pgrag.vector_scale(v vector, f float8) RETURNS vector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT array_agg(x * f ORDER BY i)::real[]::vector
    FROM unnest(v::real[]) WITH ORDINALITY AS u(x, i)
$$;

-- The mean vector each language of an embedding set is compared with: its own mean when it
-- has min_chunks chunks (own_mean), else the mean of the whole set.
CREATE OR REPLACE FUNCTION pgrag.language_means(p_set_id bigint, min_chunks int DEFAULT 3)
RETURNS TABLE (lang text, n bigint, mean vector, own_mean boolean)
LANGUAGE sql STABLE AS $$
    WITH s AS (
        SELECT ls.lang, sum(ls.n)::bigint AS n, sum(ls.total) AS total
        FROM pgrag.language_sums ls
        WHERE ls.set_id = p_set_id
        GROUP BY ls.lang
        HAVING sum(ls.n) > 0
    ), overall AS (
        SELECT sum(s.n) AS n, sum(s.total) AS total FROM s
    )
    SELECT s.lang, s.n,
           CASE WHEN s.n >= min_chunks AND s.lang <> 'und'
                THEN pgrag.vector_scale(s.total, 1.0 / s.n)
                ELSE pgrag.vector_scale(o.total, 1.0 / o.n) END,
           s.n >= min_chunks AND s.lang <> 'und'
    FROM s CROSS JOIN overall o
$$;

-- Fold a set's (or every set's) running sums into one row per language, and drop the sums
-- of deleted sets. Called after ingestion runs and re-indexing; harmless at any time.
CREATE OR REPLACE FUNCTION pgrag.compact_language_sums(p_set_id bigint DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    folded int;
BEGIN
    DELETE FROM pgrag.language_sums ls
    WHERE NOT EXISTS (SELECT 1 FROM pgrag.embedding_sets es WHERE es.id = ls.set_id);
    WITH gone AS (
        DELETE FROM pgrag.language_sums ls
        WHERE (p_set_id IS NULL OR ls.set_id = p_set_id)
          AND (ls.set_id, ls.lang) IN (SELECT x.set_id, x.lang FROM pgrag.language_sums x
                                       GROUP BY 1, 2 HAVING count(*) > 1)
        RETURNING ls.set_id, ls.lang, ls.n, ls.total
    ), ins AS (
        INSERT INTO pgrag.language_sums (set_id, lang, n, total)
        SELECT g.set_id, g.lang, sum(g.n), sum(g.total) FROM gone g GROUP BY 1, 2
        HAVING sum(g.n) > 0
        RETURNING 1
    )
    SELECT count(*) INTO folded FROM gone;
    RETURN folded;
END
$$;

-- Recount a set's sums from its vectors (after languages were detected for existing
-- chunks, or to shed the rounding of many incremental updates).
CREATE OR REPLACE FUNCTION pgrag.recount_language_sums(p_set_id bigint) RETURNS void
LANGUAGE sql AS $$
    DELETE FROM pgrag.language_sums WHERE set_id = p_set_id;
    INSERT INTO pgrag.language_sums (set_id, lang, n, total)
    SELECT e.set_id, e.lang, count(*), sum(e.embedding)
    FROM pgrag.embeddings e WHERE e.set_id = p_set_id GROUP BY 1, 2;
$$;

-- The semantic leg of one embedding set, as SQL text: chunk, cosine distance to $1, the
-- chunk's language and vector, nearest first, $3 rows. The dimension and set id are
-- interpolated as integers read from pgrag.embedding_sets, so that the planner matches the
-- set's partial HNSW index (a bound parameter would not prove the index predicate).
-- Without document filters ($2) no join is needed: the set belongs to one collection.
-- p_by_language keeps the languages in $4.
CREATE OR REPLACE FUNCTION pgrag.semantic_leg_sql(
    p_set_id bigint, p_dimensions int, p_filtered boolean, p_by_language boolean
) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT format(
        'SELECT e.chunk_id, (%1$s <=> $1::%2$s) AS distance, e.lang, e.embedding '
        'FROM pgrag.embeddings e %4$s'
        'WHERE e.set_id = %3$s %5$s%6$s'
        'ORDER BY %1$s <=> $1::%2$s LIMIT $3',
        pgrag.embedding_expr(p_dimensions),
        CASE WHEN p_dimensions > 2000 THEN format('halfvec(%s)', p_dimensions)
             ELSE format('vector(%s)', p_dimensions) END,
        p_set_id,
        CASE WHEN p_filtered THEN 'JOIN pgrag.chunks c ON c.id = e.chunk_id '
                                  'JOIN pgrag.documents d ON d.id = c.document_id ' ELSE '' END,
        CASE WHEN p_filtered THEN 'AND pgrag.document_matches(d, $2) ' ELSE '' END,
        CASE WHEN p_by_language THEN 'AND e.lang = ANY ($4) ' ELSE '' END)
$$;

-- Semantic candidates of the active sets of the collections in scope: `similarity` ranks
-- (language-neutral when the set holds several languages, see the header), `cosine` is
-- the plain similarity, `centred` says whether the language correction applied.
CREATE OR REPLACE FUNCTION pgrag.semantic_candidates(
    query_embedding vector,
    pool_size       int DEFAULT 100,
    collection_ids  bigint[] DEFAULT NULL,
    filters         jsonb DEFAULT '{}'::jsonb,
    embedding_model text DEFAULT NULL,
    query_lang      text DEFAULT NULL
) RETURNS TABLE (
    chunk_id   bigint,
    similarity float8,
    rank       int,
    cosine     float8,
    lang       text,
    centred    boolean
)
LANGUAGE plpgsql STABLE ROWS 100 AS $$
DECLARE
    s record;
    g record;
    query_mean vector;
    m_langs text[];
    m_means vector[];
    m_own boolean[];
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
        SELECT array_agg(lm.lang), array_agg(lm.mean), array_agg(lm.own_mean)
        INTO m_langs, m_means, m_own
        FROM pgrag.language_means(s.id) lm;
        IF coalesce(array_length(array_positions(m_own, true), 1), 0) < 2 THEN
            RETURN QUERY EXECUTE
                'SELECT chunk_id, 1 - distance, 0, 1 - distance, lang, false FROM ('
                || pgrag.semantic_leg_sql(s.id, s.dimensions, filtered, false) || ') leg'
                USING query_embedding, coalesce(filters, '{}'::jsonb), pool_size;
            CONTINUE;
        END IF;
        query_mean := coalesce(
            (SELECT u.mean FROM unnest(m_langs, m_means, m_own) u(lang, mean, own)
             WHERE u.lang = query_lang AND u.own),
            (SELECT u.mean FROM unnest(m_langs, m_means, m_own) u(lang, mean, own)
             WHERE NOT u.own LIMIT 1),
            (SELECT pgrag.vector_scale(sum(ls.total), 1.0 / sum(ls.n))
             FROM pgrag.language_sums ls WHERE ls.set_id = s.id));
        FOR g IN
            SELECT array_agg(u.lang) AS langs, (array_agg(u.mean))[1] AS mean
            FROM unnest(m_langs, m_means, m_own) u(lang, mean, own)
            GROUP BY CASE WHEN u.own THEN u.lang END
        LOOP
            -- q.d - q.mean(lang d) + q.mean(lang q): 0 added within the query's language
            RETURN QUERY EXECUTE
                'SELECT chunk_id, 1 - distance + $5, 0, 1 - distance, lang, true FROM ('
                || pgrag.semantic_leg_sql(s.id, s.dimensions, filtered, true) || ') leg'
                USING query_embedding, coalesce(filters, '{}'::jsonb), pool_size, g.langs,
                      (query_embedding <#> g.mean) - (query_embedding <#> query_mean);
        END LOOP;
    END LOOP;
END
$$;
