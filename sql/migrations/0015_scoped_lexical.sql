-- The lexical leg for collection-scoped keys at the speed of unscoped ones.
--
-- Under row-level security (0011) every query on pgrag.chunks evaluates the policy before
-- any qual that is not leakproof, and `tsv @@ query` is not: PostgreSQL cannot use the GIN
-- index and scans every chunk, calling the policy per row. On SciFact (5,183 chunks) a
-- scoped hybrid search took ~95 ms against ~11 ms unscoped, and the gap grows with the
-- table. The BM25 functions now run as their owner (SECURITY DEFINER, which RLS does not
-- restrict) and restrict rows themselves to `readable`: the collections the *caller* can
-- see, read under the caller's own RLS by pgrag.readable_collections() in the invoker
-- wrapper pgrag.lexical_candidates (NULL when RLS does not apply to the caller, i.e. the
-- owner: every collection). A call under SET ROLE never runs unrestricted even if
-- `readable` is NULL, and a scoped caller's document frequencies are counted over its own
-- collections only (no table-wide statistics from pg_stats), as under RLS before.

-- Collections the caller may read: NULL (all) when row-level security does not apply to
-- it, else the ids RLS lets it see in pgrag.collections (none without pgrag.scope).
CREATE FUNCTION pgrag.readable_collections() RETURNS bigint[]
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN row_security_active('pgrag.chunks'::regclass)
                THEN ARRAY(SELECT c.id FROM pgrag.collections c) END
$$;

CREATE FUNCTION pgrag.lexical_fallback_in(
    tsq            tsquery,
    terms          tsquery[],
    collection_ids bigint[],
    filters        jsonb,
    scored         bigint[],
    max_rows       int,
    readable       bigint[]
) RETURNS TABLE (id bigint, len int, r float4[])
LANGUAGE plpgsql STABLE ROWS 100
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF readable IS NULL AND current_setting('role', true) IS DISTINCT FROM 'none' THEN
        readable := '{}';
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT c.id, length(c.tsv), '
        '       ARRAY(SELECT ts_rank(''{1,1,1,1}'', c.tsv, t) FROM unnest(%L::tsquery[]) t) '
        'FROM pgrag.chunks c JOIN pgrag.documents d ON d.id = c.document_id '
        'WHERE c.tsv @@ %L::tsquery '
        '  AND (%L::bigint[] IS NULL OR c.collection_id = ANY (%L::bigint[])) '
        '  AND (%L::bigint[] IS NULL OR c.collection_id = ANY (%L::bigint[])) '
        '  AND pgrag.document_matches(d, %L::jsonb) AND NOT (c.id = ANY (%L::bigint[])) '
        'LIMIT %s',
        terms, tsq, collection_ids, collection_ids, readable, readable,
        coalesce(filters, '{}'::jsonb), scored, max_rows);
END
$$;

CREATE FUNCTION pgrag.lexical_candidates_in(
    query_text       text,
    pool_size        int DEFAULT 100,
    collection_ids   bigint[] DEFAULT NULL,
    filters          jsonb DEFAULT '{}'::jsonb,
    bm25_k1          float8 DEFAULT 0.9,
    bm25_b           float8 DEFAULT 0.4,
    candidate_budget float8 DEFAULT 1000,
    rescore_size     int DEFAULT 150,
    readable         bigint[] DEFAULT '{}'  -- NULL: every collection
) RETURNS TABLE (chunk_id bigint, score float8, coverage float8, rank int)
LANGUAGE plpgsql STABLE ROWS 100
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan  -- plan once per session, not per call
-- postings from the GIN index always beat reading tsvectors (detoasting them is not in the
-- planner's costs, so on a small table it would scan every tsvector once per term)
SET enable_seqscan = off
AS $$
#variable_conflict use_column
BEGIN
    IF readable IS NULL AND current_setting('role', true) IS DISTINCT FROM 'none' THEN
        readable := '{}';  -- a caller under SET ROLE is never unrestricted (fail closed)
    END IF;
    RETURN QUERY
    WITH q AS (
        SELECT t.tsq,
               -- a plain OR of terms (the default form): every chunk holding a term matches
               regexp_replace(t.tsq::text, '''([^'']|'''')*''', '', 'g') !~ '[&!<]' AS plain
        FROM (SELECT pgrag.lexical_query(query_text) AS tsq) t
    ),
    n AS (SELECT pgrag.chunk_count_estimate() AS n),
    qterms AS MATERIALIZED (SELECT t.* FROM q CROSS JOIN LATERAL pgrag.query_terms(q.tsq) t),
    -- ANALYZE's sample frequency of the query terms it tracks (the ~1000 commonest lexemes,
    -- table-wide: so only for unrestricted callers; a scoped one counts every term exactly
    -- in its own collections)
    st AS MATERIALIZED (
        SELECT f.lexeme, f.freq
        FROM pg_stats s,
             unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs::float8[])
                 AS f(lexeme, freq)
        WHERE s.schemaname = 'pgrag' AND s.tablename = 'chunks' AND s.attname = 'tsv'
          AND NOT s.inherited
          AND f.lexeme IN (SELECT lexeme FROM qterms)
          AND readable IS NULL
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
    -- pass 1: postings of the generating terms in every readable collection (df over them)
    hits AS MATERIALIZED (
        SELECT g.i, c.id, c.collection_id, c.document_id
        FROM qt, unnest(qt.terms, qt.generates) WITH ORDINALITY AS g(term, generates, i),
             LATERAL (SELECT c.id, c.collection_id, c.document_id FROM pgrag.chunks c
                      WHERE c.tsv @@ g.term
                        AND (readable IS NULL OR c.collection_id = ANY (readable))) c
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
             pgrag.lexical_fallback_in(q.tsq, qt.terms, collection_ids, filters,
                                       ARRAY(SELECT id FROM cand), 10 * pool_size, readable) f
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

-- Same signature and results as before (0004); callers (hybrid_fusion, psql) are unchanged.
CREATE OR REPLACE FUNCTION pgrag.lexical_candidates(
    query_text       text,
    pool_size        int DEFAULT 100,
    collection_ids   bigint[] DEFAULT NULL,
    filters          jsonb DEFAULT '{}'::jsonb,
    bm25_k1          float8 DEFAULT 0.9,
    bm25_b           float8 DEFAULT 0.4,
    candidate_budget float8 DEFAULT 1000,
    rescore_size     int DEFAULT 150
) RETURNS TABLE (chunk_id bigint, score float8, coverage float8, rank int)
LANGUAGE sql STABLE ROWS 100 AS $$
    SELECT * FROM pgrag.lexical_candidates_in(query_text, pool_size, collection_ids, filters,
                                              bm25_k1, bm25_b, candidate_budget, rescore_size,
                                              pgrag.readable_collections())
$$;

DROP FUNCTION pgrag.lexical_fallback(tsquery, tsquery[], bigint[], jsonb, bigint[], int);
