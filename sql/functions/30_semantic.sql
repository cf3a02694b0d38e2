-- The semantic leg: cosine similarity over pgvector, one partial HNSW index per embedding
-- set (halfvec above 2,000 dimensions), searched with iterative scans so that filters do
-- not starve the pool.
--
-- Language-neutral similarity. A multilingual model ranks any same-language text above
-- the other-language text that answers (xquad-mixed, question in the other language than
-- its paragraph: benchmarks/README.md, "plain cosine"). When an embedding set holds at least two
-- languages with min_documents documents each:
--   * chunks in the query's language keep their plain cosine (their order is unchanged);
--   * a chunk in another language is compared with both sides centred on their language:
--       centred = (q - mean(lang q)) . (d - mean(lang d))
--                 / (|q - mean(lang q)| * max(|d - mean(lang d)|, 0.3))
--     and put on the query language's scale by the linear map that turns the centred
--     similarities of the query language's own candidates into their cosines (mean and
--     spread matched); without 5 such candidates every chunk is ranked centred.
-- mean(L) = the mean of the mean vectors of L's documents (pgrag.language_sums, kept by
-- triggers on pgrag.embeddings: means follow every insert and delete, for any model,
-- without re-embedding; a 3,000-row sheet weighs as much as a memo). A language with fewer
-- than min_documents documents, `und` (no words) and a query language the set lacks use
-- the mean of all documents. Centring removes what a language's texts share, including
-- what makes tabular rows near to every query (docbench: cross-lingual hit@3 0.29 -> see
-- benchmarks/README.md); the floor keeps near-copies of a mean from being magnified.
-- Candidates come per language from the HNSW index: plain cosine order for the query's
-- language, cos(q - mean(lang q), d) order for the others, then rescored exactly.
-- With one language the plain cosine is used, exactly as before.

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

-- One HNSW (cosine) index per embedding set; halfvec above 2,000 dimensions. ef_construction
-- 128, not pgvector's 64: on the synthetic SciFact corpus of benchmarks/scale.py at 1M vectors,
-- recall@10 at ef_search 633 is 0.976 against 0.942 (benchmarks/hnsw_graph.py), for a build
-- 1.8x as long; m 24 or 32 gain no more recall and cost more.
CREATE OR REPLACE FUNCTION pgrag.ensure_embedding_index(p_set_id bigint) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    statement text := pgrag.embedding_index_sql(p_set_id);
BEGIN
    IF statement IS NULL THEN
        RAISE EXCEPTION 'no embedding set %', p_set_id USING ERRCODE = 'no_data_found';
    END IF;
    PERFORM set_config('search_path', pgrag.vector_search_path(), true);
    EXECUTE statement;
    RETURN format('embeddings_hnsw_%s', p_set_id);
END
$$;

-- The statement that creates a set's index (NULL: no such set), for ensure_embedding_index
-- and, with p_concurrently, for a build after a table source's backfill
-- (pgrag/store/vector_index.py: CREATE INDEX CONCURRENTLY cannot run inside a function).
-- It names the vector type unqualified: run it under pgrag.vector_search_path().
CREATE OR REPLACE FUNCTION pgrag.embedding_index_sql(
    p_set_id bigint, p_concurrently boolean DEFAULT false
) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT format(
        'CREATE INDEX %sIF NOT EXISTS %I ON pgrag.embeddings USING hnsw ((%s) %s) '
        'WITH (m = 16, ef_construction = 128) WHERE set_id = %s',
        CASE WHEN p_concurrently THEN 'CONCURRENTLY ' ELSE '' END,
        format('embeddings_hnsw_%s', es.id), pgrag.embedding_expr(es.dimensions),
        pgrag.embedding_opclass(es.dimensions), es.id)
    FROM pgrag.embedding_sets es WHERE es.id = p_set_id
$$;

-- pg_catalog, the vector extension's schema (public, extensions, ...), pg_temp.
CREATE OR REPLACE FUNCTION pgrag.vector_search_path() RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT format('pg_catalog, %I, pg_temp', n.nspname)
    FROM pg_extension x JOIN pg_namespace n ON n.oid = x.extnamespace
    WHERE x.extname = 'vector'
$$;

CREATE OR REPLACE FUNCTION pgrag.hnsw_ef_search(pool_size int, set_rows numeric)
RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT least(1000, greatest(pool_size, 40,
                                ceil(20 * sqrt(coalesce(set_rows, 0) / 1000.0))::int))
$$;

-- v * f, element by element (pgvector has no scalar product).
CREATE OR REPLACE FUNCTION pgrag.vector_scale(v vector, f float8) RETURNS vector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT array_agg(x * f ORDER BY i)::real[]::vector
    FROM unnest(v::real[]) WITH ORDINALITY AS u(x, i)
$$;

-- The mean vector each language of an embedding set is compared with: the mean of its
-- documents' mean vectors (a 3,000-row sheet weighs as much as a memo) when the language
-- has min_documents documents (own_mean), else the mean over every document of the set.
CREATE OR REPLACE FUNCTION pgrag.language_means(p_set_id bigint, min_documents int DEFAULT 2)
RETURNS TABLE (lang text, n bigint, documents bigint, mean vector, own_mean boolean)
-- plpgsql, not sql: Citus cannot plan a parameterised SQL function over distributed tables
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
    -- the set's own collection: one shard on Citus (a value, not a subquery, to route by)
    cid bigint := (SELECT es.collection_id FROM pgrag.embedding_sets es WHERE es.id = p_set_id);
BEGIN
    RETURN QUERY
    WITH s AS (
        SELECT ls.lang, sum(ls.n)::bigint AS n, sum(ls.documents)::bigint AS documents,
               sum(ls.total) AS total
        FROM pgrag.language_sums ls
        WHERE ls.collection_id = cid AND ls.set_id = p_set_id
        GROUP BY ls.lang
        HAVING sum(ls.documents) > 0
    ), overall AS (
        SELECT sum(s.documents) AS documents, sum(s.total) AS total FROM s
    )
    SELECT s.lang, s.n, s.documents,
           CASE WHEN s.documents >= min_documents AND s.lang <> 'und'
                THEN pgrag.vector_scale(s.total, 1.0 / s.documents)
                ELSE pgrag.vector_scale(o.total, 1.0 / o.documents) END,
           s.documents >= min_documents AND s.lang <> 'und'
    FROM s CROSS JOIN overall o;
END
$$;

-- Fold a set's (or every set's) running sums into one row per language, and drop the sums
-- of deleted sets. Called after ingestion runs; harmless at any time.
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
        RETURNING ls.collection_id, ls.set_id, ls.lang, ls.n, ls.documents, ls.total
    ), ins AS (
        INSERT INTO pgrag.language_sums (collection_id, set_id, lang, n, documents, total)
        SELECT g.collection_id, g.set_id, g.lang, sum(g.n), sum(g.documents), sum(g.total)
        FROM gone g GROUP BY 1, 2, 3
        HAVING sum(g.documents) > 0
        RETURNING 1
    )
    SELECT count(*) INTO folded FROM gone;
    RETURN folded;
END
$$;

-- Recount a set's sums from its vectors: after languages were detected for existing
-- chunks, after re-indexing (its batches split documents), or to shed the rounding of many
-- incremental updates.
CREATE OR REPLACE FUNCTION pgrag.recount_language_sums(p_set_id bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    cid bigint := (SELECT es.collection_id FROM pgrag.embedding_sets es WHERE es.id = p_set_id);
BEGIN
    DELETE FROM pgrag.language_sums WHERE set_id = p_set_id;
    INSERT INTO pgrag.language_sums (collection_id, set_id, lang, n, documents, total)
    SELECT d.collection_id, d.set_id, d.lang, sum(d.n), count(*), sum(d.mean)
    FROM (SELECT e.collection_id, e.set_id, e.lang, count(*) AS n, avg(e.embedding) AS mean
          FROM pgrag.embeddings e WHERE e.collection_id = cid AND e.set_id = p_set_id
          GROUP BY e.collection_id, e.set_id, e.lang, e.document_id) d
    GROUP BY d.collection_id, d.set_id, d.lang;
END
$$;

-- Add (p_sign 1) or subtract (-1) one document's vectors to its sets' sums: what the
-- triggers on pgrag.embeddings do on a single server. Citus runs no such triggers (they
-- would fire on the worker holding the shard), so there the writer calls this after
-- inserting a version's vectors and before deleting them; with the triggers in place it
-- does nothing.
CREATE OR REPLACE FUNCTION pgrag.write_language_sums(
    p_collection_id bigint, p_document_id uuid, p_sign int
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'pgrag.embeddings'::regclass
               AND tgname = 'embeddings_sums_added') THEN
        RETURN;
    END IF;
    INSERT INTO pgrag.language_sums (collection_id, set_id, lang, n, documents, total)
    SELECT e.collection_id, e.set_id, e.lang, p_sign * count(*), p_sign,
           CASE WHEN p_sign < 0 THEN pgrag.vector_negate(avg(e.embedding))
                ELSE avg(e.embedding) END
    FROM pgrag.embeddings e
    WHERE e.collection_id = p_collection_id AND e.document_id = p_document_id
    GROUP BY e.collection_id, e.set_id, e.lang;
END
$$;

-- The semantic leg of one embedding set, as SQL text: chunk, cosine distance to $1, the
-- chunk's language and vector, nearest first, $3 rows. The dimension and set id are
-- interpolated as integers read from pgrag.embedding_sets, so that the planner matches the
-- set's partial HNSW index (a bound parameter would not prove the index predicate).
-- Without document filters ($2) no join is needed: the set belongs to one collection.
-- p_by_language keeps the languages in $4. p_collection_id (the set's collection) names the
-- one shard that holds the set on Citus, and keeps every join on it. p_disabled: the set's
-- collection's disabled chunks (migration 0032), left out as a literal list the HNSW scan
-- filters (iterative scans draw more rows in their place); none: the statement is unchanged.
CREATE OR REPLACE FUNCTION pgrag.semantic_leg_sql(
    p_set_id bigint, p_dimensions int, p_filtered boolean, p_by_language boolean,
    p_collection_id bigint DEFAULT NULL, p_disabled bigint[] DEFAULT NULL
) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT format(
        'SELECT e.chunk_id, (%1$s <=> $1::%2$s) AS distance, e.lang, e.embedding '
        'FROM pgrag.embeddings e %4$s'
        'WHERE e.set_id = %3$s %5$s%6$s%7$s%8$s'
        'ORDER BY %1$s <=> $1::%2$s LIMIT $3',
        pgrag.embedding_expr(p_dimensions),
        CASE WHEN p_dimensions > 2000 THEN format('halfvec(%s)', p_dimensions)
             ELSE format('vector(%s)', p_dimensions) END,
        p_set_id,
        CASE WHEN p_filtered
             THEN 'JOIN pgrag.chunks c ON c.id = e.chunk_id AND c.collection_id = e.collection_id '
                  'JOIN pgrag.documents d ON d.id = c.document_id '
                  'AND d.collection_id = c.collection_id ' ELSE '' END,
        CASE WHEN p_filtered
             THEN 'AND pgrag.document_fields_match(folder => d.folder, file_type => d.file_type, '
                  'id => d.id, modified_at => d.modified_at, created_at => d.created_at, '
                  'submitter => d.submitter, author => d.author, tags => d.tags, '
                  'filters => $2, metadata => d.metadata) ' ELSE '' END,
        CASE WHEN p_by_language THEN 'AND e.lang = ANY ($4) ' ELSE '' END,
        CASE WHEN p_collection_id IS NOT NULL
             THEN format('AND e.collection_id = %s ', p_collection_id) ELSE '' END,
        CASE WHEN coalesce(cardinality(p_disabled), 0) > 0
             THEN format('AND NOT (e.chunk_id = ANY (%L::bigint[])) ', p_disabled) ELSE '' END)
$$;

-- A set's candidates of every language on the query language's scale: the linear map that
-- turns the centred similarities (cens) of the query language's own candidates (own_lang)
-- into their cosines (raws) puts the other languages' centred similarities there.
CREATE OR REPLACE FUNCTION pgrag.semantic_on_query_scale(
    ids bigint[], raws float8[], cens float8[], langs text[], own_lang boolean[]
) RETURNS TABLE (
    chunk_id bigint, similarity float8, rank int, cosine float8, lang text, centred boolean
)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    WITH c AS (
        SELECT * FROM unnest(ids, raws, cens, langs, own_lang) AS c(id, raw, cen, lang, own)
    ), fit AS (
        SELECT avg(c.raw) AS mr, stddev_pop(c.raw) AS sr,
               avg(c.cen) AS mc, stddev_pop(c.cen) AS sc, count(*) AS k
        FROM c WHERE c.own
    )
    SELECT c.id, CASE WHEN NOT f.fitted THEN c.cen
                      WHEN c.own THEN c.raw
                      ELSE fit.mr + (c.cen - fit.mc) * fit.sr / fit.sc END,
           0, c.raw, c.lang, NOT (f.fitted AND c.own)
    FROM c CROSS JOIN fit
    -- too few candidates in the query's language to fit the map: all stay centred
    CROSS JOIN LATERAL (SELECT fit.k >= 5 AND fit.sc > 0 AS fitted) f
$$;

-- Semantic candidates of the active sets of the collections in scope: `similarity` ranks
-- (language-neutral when the set holds several languages, see the header), `cosine` is
-- the plain similarity, `centred` says the chunk was compared language-centred.
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
    ids bigint[];
    raws float8[];
    cens float8[];
    langs text[];
    own_lang boolean[];
    set_rows numeric;
    filtered boolean := coalesce(filters, '{}'::jsonb) <> '{}'::jsonb;
BEGIN
    -- iterative scans keep filtered queries at pool_size rows (pgvector >= 0.8). Through
    -- pgrag.set_local, not set_config(): on a Citus cluster they reach the workers, where
    -- the HNSW scans run (otherwise a shard returns at most the default ef_search, 40 rows)
    PERFORM pgrag.set_local('hnsw.iterative_scan', 'relaxed_order');
    FOR s IN
        SELECT es.id, es.dimensions, es.collection_id FROM pgrag.collections col
        JOIN pgrag.embedding_sets es ON es.id = col.active_set_id
        WHERE (collection_ids IS NULL OR col.id = ANY (collection_ids))
          AND (embedding_model IS NULL OR es.model = embedding_model)
          AND es.dimensions = vector_dims(query_embedding)
    LOOP
        SELECT array_agg(lm.lang), array_agg(lm.mean), array_agg(lm.own_mean), sum(lm.n)
        INTO m_langs, m_means, m_own, set_rows
        FROM pgrag.language_means(s.id) lm;
        PERFORM pgrag.set_local('hnsw.ef_search',
                                pgrag.hnsw_ef_search(pool_size, set_rows)::text);
        IF coalesce(array_length(array_positions(m_own, true), 1), 0) < 2 THEN
            RETURN QUERY EXECUTE
                'SELECT chunk_id, 1 - distance, 0, 1 - distance, lang, false FROM ('
                || pgrag.semantic_leg_sql(p_set_id => s.id, p_dimensions => s.dimensions,
                                          p_filtered => filtered, p_by_language => false,
                                          p_collection_id => s.collection_id,
                                          p_disabled => pgrag.disabled_chunks(s.collection_id))
                || ') leg'
                USING query_embedding, coalesce(filters, '{}'::jsonb), pool_size;
            CONTINUE;
        END IF;
        query_mean := coalesce(
            (SELECT u.mean FROM unnest(m_langs, m_means, m_own) u(lang, mean, own)
             WHERE u.lang = query_lang AND u.own),
            (SELECT u.mean FROM unnest(m_langs, m_means, m_own) u(lang, mean, own)
             WHERE NOT u.own LIMIT 1));
        IF query_mean IS NULL THEN
            -- a statement of its own: in one expression with the arrays above, Citus sends
            -- the arrays to the shard as parameters it cannot type
            SELECT pgrag.vector_scale(sum(ls.total), 1.0 / sum(ls.documents)) INTO query_mean
            FROM pgrag.language_sums ls
            WHERE ls.collection_id = s.collection_id AND ls.set_id = s.id;
        END IF;
        ids := '{}'; raws := '{}'; cens := '{}'; langs := '{}'; own_lang := '{}';
        FOR g IN
            SELECT array_agg(u.lang) AS langs, (array_agg(u.mean))[1] AS mean,
                   coalesce(bool_or(u.own AND u.lang = query_lang), false) AS is_query_lang
            FROM unnest(m_langs, m_means, m_own) u(lang, mean, own)
            GROUP BY CASE WHEN u.own THEN u.lang END
        LOOP
            -- the query's own language is drawn in plain cosine order, the others in
            -- centred order; every candidate gets both similarities
            SELECT ids || array_agg(x.id), raws || array_agg(x.raw),
                   cens || array_agg(x.cen), langs || array_agg(x.lang),
                   own_lang || array_agg(g.is_query_lang)
            INTO ids, raws, cens, langs, own_lang
            FROM pgrag.semantic_language_pool(
                p_set_id => s.id, p_dimensions => s.dimensions, p_filtered => filtered,
                p_collection_id => s.collection_id, pool_size => pool_size,
                probe => CASE WHEN g.is_query_lang THEN query_embedding
                              ELSE query_embedding - query_mean END,
                centred_query => query_embedding - query_mean, query_embedding => query_embedding,
                lang_mean => g.mean, langs => g.langs, filters => coalesce(filters, '{}'::jsonb),
                p_disabled => pgrag.disabled_chunks(s.collection_id)) x;
        END LOOP;
        RETURN QUERY SELECT * FROM pgrag.semantic_on_query_scale(
            ids => ids, raws => raws, cens => cens, langs => langs, own_lang => own_lang);
    END LOOP;
END
$$;

-- One language group's candidates for semantic_candidates: drawn nearest to `probe`
-- (HNSW), with the plain cosine to the query and the centred similarity
--   (q - mean(lang q)) . (d - mean(lang d)) / (|q - mean(lang q)| * max(|d - mean(lang d)|, 0.3))
-- (the floor keeps chunks that are near-copies of their language's mean, whose centred
-- direction is noise, from being magnified; diverse text has |d - mean| >= 0.35).
CREATE OR REPLACE FUNCTION pgrag.semantic_language_pool(
    p_set_id bigint, p_dimensions int, p_filtered boolean, probe vector,
    centred_query vector, query_embedding vector, lang_mean vector, langs text[],
    filters jsonb, pool_size int, p_collection_id bigint DEFAULT NULL,
    p_disabled bigint[] DEFAULT NULL
) RETURNS TABLE (id bigint, raw float8, cen float8, lang text)
LANGUAGE plpgsql STABLE ROWS 100 AS $$
BEGIN
    RETURN QUERY EXECUTE
        'SELECT chunk_id, 1 - (embedding <=> $6), '
        '       -((embedding - $5) <#> $7) / (vector_norm($7) '
        '       * greatest(vector_norm(embedding - $5), 0.3)), lang FROM ('
        || pgrag.semantic_leg_sql(p_set_id => p_set_id, p_dimensions => p_dimensions,
                                  p_filtered => p_filtered, p_by_language => true,
                                  p_collection_id => p_collection_id,
                                  p_disabled => p_disabled)
        || ') leg'
        USING probe, filters, pool_size, langs, lang_mean, query_embedding, centred_query;
END
$$;
