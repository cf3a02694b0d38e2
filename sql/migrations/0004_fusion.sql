-- Fusion v2: a BM25 lexical leg and score-aware, per-query weighted fusion.
--
-- Measured on BEIR sets (benchmarks/quality.py, benchmarks/README.md): plain RRF (0002) lets
-- a leg without signal drag a good one down (XQuAD en->zh: English questions, Chinese
-- passages), and ts_rank_cd has no IDF (SciFact keyword nDCG@10 0.38 vs BM25 0.69).
--
-- Lexical leg (pgrag.lexical_candidates): BM25 over the stored tsvector.
--   score(d) = sum over query terms t in d of
--              idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avglen))
--   idf(t)   = ln(1 + (N - df + 0.5) / (df + 0.5))
--   tf       term frequency, recovered from ts_rank(tsv, t) with unit weights, which is
--            sum(1/i^2, i = 1..tf) / (pi^2/6) for one term, inverted as 1/((pi^2/6)(1-r)) - 0.5
--   len(d)   distinct lexemes of the chunk; avglen their mean over the candidates
--   N, df    N from pg_class (scaled to the current table size like the planner does);
--            df counted exactly for the terms that generate candidates, and taken from
--            ANALYZE's lexeme frequencies (pg_stats.most_common_elems of pgrag.chunks.tsv)
--            for very common terms
-- Candidates, in two passes so that a query costs about a microsecond per posting and not
-- a tsvector read per matching chunk: (1) the GIN postings of the generating terms give
-- their exact df and a presence score sum(idf) per chunk in scope; (2) the rescore_size best
-- by presence get the full BM25 above with every query term. Generating terms are those
-- rarer than any lexeme ANALYZE tracks, plus common ones (rarest first) while their
-- estimated postings stay within candidate_budget: chunks holding only the commonest terms
-- score little under BM25. When the scope (collections, filters) or a phrase/negation
-- query leaves fewer than pool_size candidates, the other chunks in scope that match the
-- query are scored too (pgrag.lexical_fallback, planned with the literal filters).
--
-- Fusion (pgrag.hybrid_search, fusion => 'adaptive', the default): a convex combination of
-- max-normalised BM25 and min-max-normalised cosine similarity over the two pools, with a
-- per-query lexical share from how much of the query the best lexical hit covers:
--   coverage  = sum(idf of query terms in the top lexical chunk) / sum(idf of all query terms)
--   share     = least(max_lexical_share, coverage_gain * coverage)
--               (1 when the semantic pool is empty, 0 when the lexical pool is empty)
--   fused     = lexical_weight  * share       * lexical_score / max(lexical_score)
--             + semantic_weight * (1 - share) * (sim - min(sim)) / (max(sim) - min(sim))
-- Defaults coverage_gain 1.2, max_lexical_share 0.8 were chosen on SciFact train and held
-- across xquad-zh, xquad-en2zh and cmrc2018-dev (every value in 1.0-1.3 x 0.75-0.85 kept
-- hybrid >= the best single leg). fusion => 'rrf' keeps the 0002 formula:
--   fused = lexical_weight / (rrf_k + lexical_rank) + semantic_weight / (rrf_k + semantic_rank)
--
-- Also here: pgrag.document_matches rewritten without sub-selects (same semantics) so that
-- the planner inlines it (a filter costs ~1 us per row instead of ~10 us, and literal
-- filters can use documents_folder_idx), and an unfiltered semantic leg without joins.
--
-- From psql:
--   SELECT * FROM pgrag.hybrid_search('contract signing', '[...]'::vector, 5);
--   SELECT * FROM pgrag.hybrid_search_detail('contract signing', '[...]'::vector, 5);
--   SELECT * FROM pgrag.hybrid_fusion('contract signing', '[...]'::vector);  -- unranked pool

-- Positive lexemes of a tsquery, with a one-lexeme tsquery for each (negated ones left out:
-- chunks holding them never match).
CREATE FUNCTION pgrag.query_terms(tsq tsquery)
RETURNS TABLE (lexeme text, term tsquery)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT DISTINCT replace(replace(m[2], '''''', ''''), '\\', '\'),
           ('''' || m[2] || '''')::tsquery
    FROM regexp_matches(tsq::text, '(!?)''((?:[^'']|'''')*)''', 'g') AS m
    WHERE m[1] = ''
$$;

-- Chunks in the table now: pg_class.reltuples scaled to the current number of pages, as the
-- planner estimates it; a count before the first ANALYZE.
CREATE FUNCTION pgrag.chunk_count_estimate() RETURNS float8
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN c.reltuples > 0 AND c.relpages > 0
                THEN c.reltuples / c.relpages
                     * greatest(pg_relation_size(c.oid) / current_setting('block_size')::int, 1)
                ELSE (SELECT count(*) FROM pgrag.chunks)::float8 END
    FROM pg_class c WHERE c.oid = 'pgrag.chunks'::regclass
$$;

-- Filtered searches need the filter per candidate: as an inlinable expression (no
-- sub-selects, same semantics as 0001) it costs about a microsecond instead of a SQL-function
-- call, and with literal filters the planner can use documents_folder_idx.
CREATE OR REPLACE FUNCTION pgrag.document_matches(d pgrag.documents, filters jsonb)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT (filters ->> 'folder' IS NULL
            OR d.folder = filters ->> 'folder'
            OR d.folder LIKE replace(replace(replace(filters ->> 'folder', '\', '\\'), '%', '\%'), '_', '\_') || '/%')
       AND (filters -> 'file_type' IS NULL
            OR CASE jsonb_typeof(filters -> 'file_type')
                    WHEN 'array' THEN filters -> 'file_type' ? d.file_type
                    ELSE filters ->> 'file_type' = d.file_type END)
       AND (filters -> 'document_ids' IS NULL OR filters -> 'document_ids' ? d.id::text)
       AND (filters ->> 'date_from' IS NULL
            OR coalesce(d.modified_at, d.created_at) >= (filters ->> 'date_from')::timestamptz)
       AND (filters ->> 'date_to' IS NULL
            OR coalesce(d.modified_at, d.created_at) <= (filters ->> 'date_to')::timestamptz)
       AND (filters ->> 'submitter' IS NULL OR d.submitter = filters ->> 'submitter')
       AND (filters ->> 'author' IS NULL OR d.author = filters ->> 'author')
       AND (filters -> 'tags' IS NULL OR filters -> 'tags' ?| d.tags)
$$;

-- Lexical fallback when the scope (collections, filters) or a phrase/negation query left
-- fewer than pool_size candidates: chunks in scope matching the query that the main pass
-- did not score. Dynamic SQL with literal filters, so that the planner can start from the
-- few documents a selective filter keeps instead of every chunk matching the query.
CREATE FUNCTION pgrag.lexical_fallback(
    tsq            tsquery,
    terms          tsquery[],
    collection_ids bigint[],
    filters        jsonb,
    scored         bigint[],
    max_rows       int
) RETURNS TABLE (id bigint, len int, r float4[])
LANGUAGE plpgsql STABLE ROWS 100 AS $$
BEGIN
    RETURN QUERY EXECUTE format(
        'SELECT c.id, length(c.tsv), '
        '       ARRAY(SELECT ts_rank(''{1,1,1,1}'', c.tsv, t) FROM unnest(%L::tsquery[]) t) '
        'FROM pgrag.chunks c JOIN pgrag.documents d ON d.id = c.document_id '
        'WHERE c.tsv @@ %L::tsquery '
        '  AND (%L::bigint[] IS NULL OR c.collection_id = ANY (%L::bigint[])) '
        '  AND pgrag.document_matches(d, %L::jsonb) AND NOT (c.id = ANY (%L::bigint[])) '
        'LIMIT %s',
        terms, tsq, collection_ids, collection_ids, coalesce(filters, '{}'::jsonb), scored,
        max_rows);
END
$$;

-- BM25 lexical leg. See the header for the formula; chunk_id, BM25 score, coverage (share
-- of the query's IDF mass the chunk holds) and rank, best first. Two passes keep the cost
-- near-linear in the postings of the candidate-generating terms (about 1 us per posting):
--   1. postings of each generating term from the GIN index (ids only, no tsvector read):
--      exact df of those terms, and a presence score sum(idf) per chunk in scope;
--   2. the rescore_size best chunks by presence score have their tsvector read once and
--      get the full BM25 with every query term (term frequencies, length normalisation).
CREATE FUNCTION pgrag.lexical_candidates(
    query_text       text,
    pool_size        int DEFAULT 100,
    collection_ids   bigint[] DEFAULT NULL,
    filters          jsonb DEFAULT '{}'::jsonb,
    bm25_k1          float8 DEFAULT 0.9,
    bm25_b           float8 DEFAULT 0.4,
    candidate_budget float8 DEFAULT 1000,
    rescore_size     int DEFAULT 150
) RETURNS TABLE (chunk_id bigint, score float8, coverage float8, rank int)
LANGUAGE plpgsql STABLE ROWS 100
SET plan_cache_mode = force_generic_plan  -- plan once per session, not per call
-- postings from the GIN index always beat reading tsvectors (detoasting them is not in the
-- planner's costs, so on a small table it would scan every tsvector once per term)
SET enable_seqscan = off
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH q AS (
        SELECT t.tsq,
               -- a plain OR of terms (the default form): every chunk holding a term matches
               regexp_replace(t.tsq::text, '''([^'']|'''')*''', '', 'g') !~ '[&!<]' AS plain
        FROM (SELECT pgrag.lexical_query(query_text) AS tsq) t
    ),
    n AS (SELECT pgrag.chunk_count_estimate() AS n),
    qterms AS MATERIALIZED (SELECT t.* FROM q CROSS JOIN LATERAL pgrag.query_terms(q.tsq) t),
    -- ANALYZE's sample frequency of the query terms it tracks (the ~1000 commonest lexemes;
    -- pg_stats shows nothing under row-level security: every term is then counted exactly)
    st AS MATERIALIZED (
        SELECT f.lexeme, f.freq
        FROM pg_stats s,
             unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs::float8[])
                 AS f(lexeme, freq)
        WHERE s.schemaname = 'pgrag' AND s.tablename = 'chunks' AND s.attname = 'tsv'
          AND NOT s.inherited
          AND f.lexeme IN (SELECT lexeme FROM qterms)
    ),
    ordered AS (
        SELECT t.term, st.freq * n.n AS est_df,  -- NULL: rarer than any tracked lexeme
               row_number() OVER w AS i, sum(coalesce(st.freq * n.n, 0)) OVER w AS cum_df
        FROM qterms t CROSS JOIN n LEFT JOIN st ON st.lexeme = t.lexeme
        WINDOW w AS (ORDER BY coalesce(st.freq, 0), t.lexeme)
    ),
    qt AS (
        SELECT array_agg(o.term ORDER BY o.i) AS terms,
               array_agg(o.est_df ORDER BY o.i) AS est_df,
               array_agg(o.est_df IS NULL OR o.i = 1 OR o.cum_df <= candidate_budget
                         ORDER BY o.i) AS generates
        FROM ordered o
    ),
    -- pass 1: postings of the generating terms, in every collection (df is table-wide)
    hits AS MATERIALIZED (
        SELECT g.i, c.id, c.collection_id, c.document_id
        FROM qt, unnest(qt.terms, qt.generates) WITH ORDINALITY AS g(term, generates, i),
             LATERAL (SELECT c.id, c.collection_id, c.document_id FROM pgrag.chunks c
                      WHERE c.tsv @@ g.term) c
        WHERE g.generates
    ),
    df AS (SELECT h.i, count(*)::float8 AS df FROM hits h GROUP BY h.i),
    idf AS MATERIALIZED (
        SELECT g.i, ln(1 + (n.n - d.df + 0.5) / (d.df + 0.5)) AS idf
        FROM n CROSS JOIN qt
        CROSS JOIN unnest(qt.generates, qt.est_df) WITH ORDINALITY AS g(generates, est_df, i)
        LEFT JOIN df ON df.i = g.i
        CROSS JOIN LATERAL (SELECT CASE WHEN g.generates THEN coalesce(df.df, 0)
                                        ELSE least(g.est_df, n.n) END AS df) d
    ),
    presence AS MATERIALIZED (
        SELECT h.id, h.collection_id, h.document_id, sum(idf.idf) AS pre
        FROM hits h JOIN idf ON idf.i = h.i
        GROUP BY h.id, h.collection_id, h.document_id
    ),
    inscope AS MATERIALIZED (
        SELECT p.id, p.pre FROM presence p
        WHERE (collection_ids IS NULL OR p.collection_id = ANY (collection_ids))
          AND (filters IS NULL OR filters = '{}'::jsonb
               OR EXISTS (SELECT 1 FROM pgrag.documents d
                          WHERE d.id = p.document_id AND pgrag.document_matches(d, filters)))
    ),
    -- pass 2: the best by presence get their tsvector read (detoasted once) and every term
    -- ranked; phrase and negation queries are checked here
    cand AS MATERIALIZED (
        SELECT x.id, length(x.v) AS len,
               ARRAY(SELECT ts_rank('{1,1,1,1}', x.v, t) FROM unnest(qt.terms) t) AS r
        FROM qt, q, LATERAL (
            SELECT c.id, c.tsv || ''::tsvector AS v
            FROM pgrag.chunks c
            WHERE c.id = ANY (ARRAY(SELECT s.id FROM inscope s ORDER BY s.pre DESC, s.id
                                    LIMIT greatest(rescore_size, pool_size)))
            OFFSET 0) x
        WHERE q.plain OR x.v @@ q.tsq
    ),
    rest AS MATERIALIZED (
        SELECT f.* FROM q, qt,
             pgrag.lexical_fallback(q.tsq, qt.terms, collection_ids, filters,
                                    ARRAY(SELECT id FROM cand), 10 * pool_size) f
        WHERE (SELECT count(*) FROM cand) < pool_size
          AND (SELECT count(*) FROM cand) < (SELECT count(*) FROM presence)
    ),
    scoring AS (SELECT * FROM cand UNION ALL SELECT * FROM rest),
    norm AS (
        SELECT array_agg(idf.idf ORDER BY idf.i) AS idf, sum(idf.idf) AS idf_sum,
               (SELECT avg(len) FROM scoring) AS avglen
        FROM idf
    ),
    scored AS (
        SELECT x.id, s.score, s.matched / norm.idf_sum AS coverage
        FROM scoring x, norm, LATERAL (
            SELECT sum(norm.idf[i] * f.tf * (bm25_k1 + 1)
                       / (f.tf + bm25_k1 * (1 - bm25_b + bm25_b * x.len / norm.avglen)))
                       AS score,
                   sum(norm.idf[i]) AS matched
            FROM generate_subscripts(x.r, 1) AS i,
                 LATERAL (SELECT 1 / (1.6449340668482264 * (1 - x.r[i])) - 0.5 AS tf) f
            WHERE x.r[i] > 0) s
    )
    SELECT s.id, s.score, s.coverage, row_number() OVER (ORDER BY s.score DESC, s.id)::int
    FROM scored s
    ORDER BY s.score DESC, s.id
    LIMIT pool_size;
END
$$;

-- The semantic leg without document filters needs no join: the embedding set already
-- belongs to one collection. Saves the planning and per-row filter cost on every search.
CREATE FUNCTION pgrag.semantic_leg_sql(p_set_id bigint, p_dimensions int, p_filtered boolean)
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

CREATE FUNCTION pgrag.check_fusion(fusion text) RETURNS text
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
CREATE FUNCTION pgrag.hybrid_fusion(
    query_text        text,
    query_embedding   vector,
    collection_ids    bigint[] DEFAULT NULL,
    filters           jsonb DEFAULT '{}'::jsonb,
    rrf_k             int DEFAULT 60,
    lexical_weight    float8 DEFAULT 1.0,
    semantic_weight   float8 DEFAULT 1.0,
    pool_size         int DEFAULT 100,
    min_similarity    float8 DEFAULT NULL,
    embedding_model   text DEFAULT NULL,
    fusion            text DEFAULT 'adaptive',
    coverage_gain     float8 DEFAULT 1.2,
    max_lexical_share float8 DEFAULT 0.8
) RETURNS TABLE (
    chunk_id         bigint,
    lexical_rank     int,
    lexical_score    float8,  -- BM25
    lexical_norm     float8,  -- lexical_score / best lexical_score
    lexical_coverage float8,  -- of this chunk; the share uses the top chunk's
    semantic_rank    int,
    semantic_score   float8,  -- cosine similarity
    semantic_norm    float8,  -- min-max over the semantic pool
    lexical_share    float8,  -- per query; NULL with fusion => 'rrf'
    fused_score      float8
)
LANGUAGE plpgsql STABLE ROWS 200
SET plan_cache_mode = force_generic_plan  -- plan once per session, not per call
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH lexical AS MATERIALIZED (
        SELECT l.* FROM pgrag.lexical_candidates(query_text, pool_size, collection_ids, filters) l
        WHERE query_text IS NOT NULL AND lexical_weight <> 0
    ),
    semantic AS MATERIALIZED (
        SELECT sc.chunk_id, sc.similarity AS score,
               row_number() OVER (ORDER BY sc.similarity DESC, sc.chunk_id)::int AS rank
        FROM pgrag.semantic_candidates(query_embedding, pool_size, collection_ids, filters,
                                       embedding_model) sc
        WHERE query_embedding IS NOT NULL AND semantic_weight <> 0
        ORDER BY sc.similarity DESC, sc.chunk_id
        LIMIT pool_size
    ),
    q AS (
        SELECT pgrag.check_fusion(fusion) AS fusion,
               (SELECT max(score) FROM lexical) AS lmax,
               (SELECT max(score) FROM semantic) AS smax,
               (SELECT min(score) FROM semantic) AS smin,
               CASE WHEN NOT EXISTS (SELECT 1 FROM semantic) THEN 1.0
                    WHEN NOT EXISTS (SELECT 1 FROM lexical) THEN 0.0
                    ELSE least(max_lexical_share,
                               coverage_gain * (SELECT coverage FROM lexical WHERE rank = 1))
               END AS share
    ),
    joined AS (
        SELECT coalesce(l.chunk_id, s.chunk_id) AS id, l.rank AS lrank, l.score AS lscore,
               l.score / nullif(q.lmax, 0) AS lnorm, l.coverage,
               s.rank AS srank, s.score AS sscore,
               CASE WHEN s.chunk_id IS NULL THEN NULL
                    WHEN q.smax > q.smin THEN (s.score - q.smin) / (q.smax - q.smin)
                    ELSE 1.0 END AS snorm,
               q.share, q.fusion
        FROM lexical l
        FULL JOIN semantic s ON s.chunk_id = l.chunk_id
        CROSS JOIN q
        WHERE min_similarity IS NULL OR s.score >= min_similarity
    )
    SELECT j.id, j.lrank, j.lscore, j.lnorm, j.coverage, j.srank, j.sscore, j.snorm,
           CASE WHEN j.fusion = 'adaptive' THEN j.share END,
           CASE WHEN j.fusion = 'rrf'
                THEN coalesce(lexical_weight / (rrf_k + j.lrank), 0)
                   + coalesce(semantic_weight / (rrf_k + j.srank), 0)
                ELSE lexical_weight * j.share * coalesce(j.lnorm, 0)
                   + semantic_weight * (1 - j.share) * coalesce(j.snorm, 0) END
    FROM joined j;
END
$$;

-- The ranked page with the terms of the formula: hybrid_search's columns, then the fusion,
-- the per-query lexical share and both normalised leg scores, so that a caller (--explain)
-- can show fused_score = lexical_weight * share * lexical_norm
--                      + semantic_weight * (1 - share) * semantic_norm.
CREATE FUNCTION pgrag.hybrid_search_detail(
    query_text        text,
    query_embedding   vector,
    match_count       int DEFAULT 10,
    collection_ids    bigint[] DEFAULT NULL,
    filters           jsonb DEFAULT '{}'::jsonb,
    rrf_k             int DEFAULT 60,
    lexical_weight    float8 DEFAULT 1.0,
    semantic_weight   float8 DEFAULT 1.0,
    pool_size         int DEFAULT 100,
    min_similarity    float8 DEFAULT NULL,
    embedding_model   text DEFAULT NULL,
    match_offset      int DEFAULT 0,
    fusion            text DEFAULT 'adaptive',
    coverage_gain     float8 DEFAULT 1.2,
    max_lexical_share float8 DEFAULT 0.8
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
    semantic_norm    float8
)
LANGUAGE sql STABLE AS $$
    WITH ranked AS (
        SELECT f.*, row_number() OVER (ORDER BY f.fused_score DESC, f.chunk_id)::int AS pos,
               count(*) OVER ()::int AS total
        FROM pgrag.hybrid_fusion(query_text, query_embedding, collection_ids, filters, rrf_k,
                                 lexical_weight, semantic_weight, pool_size, min_similarity,
                                 embedding_model, fusion, coverage_gain, max_lexical_share) f
    )
    SELECT r.pos, r.chunk_id,
           (SELECT c.document_id FROM pgrag.chunks c WHERE c.id = r.chunk_id),
           r.lexical_rank, r.lexical_score::float4, r.semantic_rank, r.semantic_score,
           r.fused_score, r.total, fusion, r.lexical_share, r.lexical_norm, r.semantic_norm
    FROM ranked r
    ORDER BY r.pos
    LIMIT match_count OFFSET match_offset
$$;

DROP FUNCTION pgrag.hybrid_search(text, vector, int, bigint[], jsonb, int, float8, float8, int,
                                  float8, text, int);

-- Same arguments and result columns as in 0002, plus the fusion choice and its two knobs
-- as trailing arguments; lexical_score is now BM25 (float4 as before).
CREATE FUNCTION pgrag.hybrid_search(
    query_text        text,
    query_embedding   vector,
    match_count       int DEFAULT 10,
    collection_ids    bigint[] DEFAULT NULL,
    filters           jsonb DEFAULT '{}'::jsonb,
    rrf_k             int DEFAULT 60,
    lexical_weight    float8 DEFAULT 1.0,
    semantic_weight   float8 DEFAULT 1.0,
    pool_size         int DEFAULT 100,
    min_similarity    float8 DEFAULT NULL,
    embedding_model   text DEFAULT NULL,
    match_offset      int DEFAULT 0,
    fusion            text DEFAULT 'adaptive',
    coverage_gain     float8 DEFAULT 1.2,
    max_lexical_share float8 DEFAULT 0.8
) RETURNS TABLE (
    rank             int,     -- final position, 1-based
    chunk_id         bigint,
    document_id      uuid,
    lexical_rank     int,     -- NULL: not in the lexical pool
    lexical_score    float4,  -- BM25
    semantic_rank    int,     -- NULL: not in the semantic pool
    semantic_score   float8,  -- cosine similarity
    fused_score      float8,
    total_candidates int      -- rows in the fused pool (before limit and offset)
)
LANGUAGE sql STABLE AS $$
    SELECT d.rank, d.chunk_id, d.document_id, d.lexical_rank, d.lexical_score,
           d.semantic_rank, d.semantic_score, d.fused_score, d.total_candidates
    FROM pgrag.hybrid_search_detail(query_text, query_embedding, match_count, collection_ids,
                                    filters, rrf_k, lexical_weight, semantic_weight, pool_size,
                                    min_similarity, embedding_model, match_offset, fusion,
                                    coverage_gain, max_lexical_share) d
$$;

DROP FUNCTION pgrag.hybrid_search_documents(text, vector, int, bigint[], jsonb, int, float8,
                                            float8, int, float8, text, int, int);

-- As in 0003, with the fusion arguments passed through.
CREATE FUNCTION pgrag.hybrid_search_documents(
    query_text          text,
    query_embedding     vector,
    match_count         int DEFAULT 10,
    collection_ids      bigint[] DEFAULT NULL,
    filters             jsonb DEFAULT '{}'::jsonb,
    rrf_k               int DEFAULT 60,
    lexical_weight      float8 DEFAULT 1.0,
    semantic_weight     float8 DEFAULT 1.0,
    pool_size           int DEFAULT 100,
    min_similarity      float8 DEFAULT NULL,
    embedding_model     text DEFAULT NULL,
    match_offset        int DEFAULT 0,
    chunks_per_document int DEFAULT 3,
    fusion              text DEFAULT 'adaptive',
    coverage_gain       float8 DEFAULT 1.2,
    max_lexical_share   float8 DEFAULT 0.8
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
        FROM pgrag.hybrid_search(query_text, query_embedding, pool_size * 2, collection_ids,
                                 filters, rrf_k, lexical_weight, semantic_weight, pool_size,
                                 min_similarity, embedding_model, 0, fusion, coverage_gain,
                                 max_lexical_share) h
    ),
    docs AS (
        SELECT b.document_id, b.chunk_id AS best, b.lexical_rank, b.lexical_score,
               b.semantic_rank, b.semantic_score, b.fused_score, b.rank AS best_rank,
               (SELECT array_agg(x.chunk_id ORDER BY x.rank) FROM hits x
                 WHERE x.document_id = b.document_id AND x.nth <= chunks_per_document) AS chunk_ids
        FROM hits b
        WHERE b.nth = 1
    )
    SELECT row_number() OVER (ORDER BY d.best_rank)::int, d.document_id, d.best, d.chunk_ids,
           d.lexical_rank, d.lexical_score, d.semantic_rank, d.semantic_score, d.fused_score,
           count(*) OVER ()::int
    FROM docs d
    ORDER BY d.best_rank
    LIMIT match_count OFFSET match_offset
$$;

DROP FUNCTION pgrag.explain_search(bigint);

-- As in 0003, replaying the logged fusion arguments (today's defaults when the log has none)
-- and showing the per-query lexical share and the normalised leg scores behind fused_score.
CREATE FUNCTION pgrag.explain_search(log_id bigint) RETURNS TABLE (
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
    semantic_norm   float8
)
LANGUAGE sql STABLE AS $$
    WITH l AS (SELECT * FROM pgrag.search_log WHERE id = log_id),
    p AS (
        SELECT l.*, (l.params ->> 'rrf_k')::int AS k,
               (l.params ->> 'lexical_weight')::float8 AS lw,
               (l.params ->> 'semantic_weight')::float8 AS sw,
               coalesce(l.params ->> 'fusion', 'adaptive') AS fu,
               coalesce((l.params ->> 'coverage_gain')::float8, 1.2) AS cg,
               coalesce((l.params ->> 'max_lexical_share')::float8, 0.8) AS ms
        FROM l
    ),
    logged AS (
        SELECT (r ->> 'chunk_id')::bigint AS chunk_id, (r ->> 'rank')::int AS rank
        FROM p, jsonb_array_elements(p.results) r
    ),
    fused AS (
        SELECT f.*, row_number() OVER (ORDER BY f.fused_score DESC, f.chunk_id)::int AS pos
        FROM p CROSS JOIN LATERAL pgrag.hybrid_fusion(
            p.query,
            CASE WHEN p.sw = 0 THEN NULL ELSE p.query_embedding END,
            (SELECT array_agg(x::bigint)
               FROM jsonb_array_elements_text(nullif(p.params -> 'collection_ids', 'null')) x),
            coalesce(p.params -> 'filters', '{}'::jsonb),
            p.k, p.lw, p.sw,
            (p.params ->> 'pool_size')::int,
            (p.params ->> 'min_similarity')::float8,
            p.params ->> 'embedding_model',
            p.fu, p.cg, p.ms) f
    )
    SELECT h.pos, g.rank, h.chunk_id, d.path,
           concat_ws(' ', 'page ' || c.page, 'section ' || c.section, 'sheet ' || c.sheet,
                     'rows ' || c.row_start || '-' || c.row_end, 'slide ' || c.slide),
           h.lexical_rank, h.lexical_score::float4, h.semantic_rank, h.semantic_score,
           h.fused_score, p.k, p.lw, p.sw, left(c.content, 120),
           p.fu, h.lexical_share, h.lexical_norm, h.semantic_norm
    FROM p
    CROSS JOIN fused h
    JOIN pgrag.chunks c ON c.id = h.chunk_id
    JOIN pgrag.documents d ON d.id = c.document_id
    LEFT JOIN logged g ON g.chunk_id = h.chunk_id
    WHERE h.pos > coalesce((p.params ->> 'match_offset')::int, 0)
      AND h.pos <= coalesce((p.params ->> 'match_offset')::int, 0)
                   + (p.params ->> 'match_count')::int
    ORDER BY h.pos
$$;
