-- The lexical leg: BM25 over the stored tsvector (pgrag.chunks.tsv = pgrag.chunk_tsv()).
--
--   score(d) = sum over query terms t in d of
--              idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avglen))
--   idf(t)   = ln(1 + (N - df + 0.5) / (df + 0.5))
--   tf       term frequency, recovered from ts_rank(tsv, t) with unit weights, which is
--            sum(1/i^2, i = 1..tf) / (pi^2/6) for one term, inverted as 1/((pi^2/6)(1-r)) - 0.5
--   len(d)   distinct lexemes of the chunk; avglen their mean over the candidates
--   N, df    over the collections searched: those the search names, else every collection
--            the caller can read (pgrag.chunk_count_estimate). Over every collection, N comes
--            from pg_class (scaled to the current table size like the planner does; on Citus
--            from the maintained per-language sums); over some, from their rows of the sums.
--            df is counted in the collections searched for the terms that generate
--            candidates; for very common terms (those beyond the candidate budget) it is
--            ANALYZE's table-wide lexeme frequency (pg_stats.most_common_elems of
--            pgrag.chunks.tsv) times N. A scoped key counts every term (table-wide
--            statistics would tell it about other collections), and so does Citus (the
--            coordinator's table has none). So a search of one collection ranks as if it were
--            alone in the database but for those estimates, and on Citus reads that
--            collection's shard only.
-- k1 = 0.9, b = 0.4 (bm25s' defaults; SciFact keyword nDCG@10 0.68 vs ts_rank_cd's 0.38).
--
-- proximity: which of a document's chunks holds the query's words closest together, for
-- the fusion (the BM25 score above ignores it). For a chunk whose document has other chunks
-- in the pool: the best window of max(proximity_width, 2 x query terms) consecutive body
-- positions, counting the idf of each distinct query term in it plus those of the chunk's
-- heading (weight A: title and section stand next to every word of the body), over the idf
-- of all the chunk's matched terms; then divided by the best such value among the
-- document's chunks. 1 for the document's closest chunk and for a document's only chunk in
-- the pool, less for a chunk whose matches are spread apart. It shows the row holding a
-- SKU together with the asked-for warehouse before the row block holding the same SKU and
-- the warehouse in other rows (benchmarks/docbench); documents of one chunk (passage
-- collections such as SciFact) are ranked as without it, at no cost.
--
-- Candidates, in two passes so that a query costs about a microsecond per posting and not
-- a tsvector read per matching chunk: (1) the GIN postings of the generating terms give
-- their exact df and a presence score sum(idf) per chunk in scope; (2) the rescore_size best
-- by presence get the full BM25 above with every query term. Generating terms are those
-- rarer than any lexeme ANALYZE tracks, plus common ones (rarest first) while their
-- estimated postings stay within candidate_budget: chunks holding only the commonest terms
-- score little under BM25. When the scope (collections, filters) or a phrase/negation
-- query leaves fewer than pool_size candidates, the other chunks in scope that match the
-- query are scored too (pgrag.lexical_fallback_in, planned with the literal filters).
--
-- Collection-scoped keys: under row-level security every query on pgrag.chunks evaluates
-- the policy before any qual that is not leakproof, and `tsv @@ query` is not, so the GIN
-- index could not be used (SciFact: a scoped search ~95 ms against ~11 ms). The BM25 work
-- therefore runs as the owner (SECURITY DEFINER: pgrag.lexical_candidates_in and
-- pgrag.lexical_fallback_in), restricted to `readable`: the collections the *caller* can
-- see, read under the caller's own RLS by pgrag.readable_collections() in the invoker
-- wrapper pgrag.lexical_candidates (NULL when RLS does not apply to the caller: every
-- collection). A call under SET ROLE never runs unrestricted even if `readable` is NULL, and
-- a scoped caller's statistics (N, df) are those of its own collections only.
--
-- Query text: pgrag.lexical_text() at query time as at index time (NFKC, lower case, CJK
-- runs as overlapping bigrams). A hyphenated word in a plain query ("IL-1") is OR-ed like
-- every other term rather than becoming a phrase, which would make the whole query a
-- phrase query; quoted phrases and negations keep websearch_to_tsquery's semantics.

-- A query's tsquery. websearch_to_tsquery would turn a compound ("IL-1",
-- "pattern-recognition") into a phrase ('il' <-> '-1'), making an otherwise OR-ed query a
-- phrase query: BM25 candidates had to contain the exact compound, most were dropped, and
-- the fallback then scored up to 10 x pool_size more chunks (20-30 ms instead of ~5 ms for
-- one SciFact query in three). Plain queries are therefore OR-ed term by term; quoted
-- phrases and negations keep websearch's semantics.
CREATE OR REPLACE FUNCTION pgrag.lexical_query(q text) RETURNS tsquery
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    parsed tsquery := websearch_to_tsquery('pgrag.search', pgrag.lexical_text(q));
BEGIN
    IF position('"' IN q) = 0 AND position('!' IN parsed::text) = 0 THEN
        -- operators sit between quoted lexemes, so the pattern cannot match inside one
        RETURN regexp_replace(parsed::text, ' (&|<->|<[0-9]+>) ', ' | ', 'g')::tsquery;
    END IF;
    RETURN parsed;
END
$$;

-- Can a query use the lexical leg? The number of nodes in its lexical form; 0 when it has no
-- searchable words or its lexical form cannot be built (fail soft: the search goes
-- on without that leg). One statement where the server sent a savepoint, the check and a
-- release: two round trips fewer per search. query_canceled is not caught (timeouts hold).
CREATE OR REPLACE FUNCTION pgrag.lexical_nodes(q text) RETURNS int
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE AS $$
BEGIN
    RETURN numnode(pgrag.lexical_query(q));
EXCEPTION WHEN OTHERS THEN
    RETURN 0;
END
$$;

-- Positive lexemes of a tsquery, with a one-lexeme tsquery for each (negated ones left out:
-- chunks holding them never match).
CREATE OR REPLACE FUNCTION pgrag.query_terms(tsq tsquery)
RETURNS TABLE (lexeme text, term tsquery)
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT DISTINCT replace(replace(m[2], '''''', ''''), '\\', '\'),
           ('''' || m[2] || '''')::tsquery
    FROM regexp_matches(tsq::text, '(!?)''((?:[^'']|'''')*)''', 'g') AS m
    WHERE m[1] = ''
$$;

-- Chunks in the collections searched (NULL: every collection), BM25's N. Of some
-- collections: their vectors of the active embedding sets, which the writers keep in
-- pgrag.language_sums (one per chunk, exact; a few rows per collection), with the ids as
-- literals so that on Citus only their shards are read. Of every collection:
-- pg_class.reltuples scaled to the current number of pages, as the planner estimates it (a
-- count before the first ANALYZE); on Citus, where the coordinator's table is an empty shell
-- without statistics, the sums of every collection.
CREATE OR REPLACE FUNCTION pgrag.chunk_count_estimate(collection_ids bigint[] DEFAULT NULL)
RETURNS float8
LANGUAGE plpgsql STABLE AS $$
DECLARE
    distributed boolean := false;
    n float8;
BEGIN
    IF collection_ids IS NULL AND to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT count(*) > 0 FROM pg_catalog.pg_dist_partition'
                ' WHERE logicalrelid = ''pgrag.chunks''::regclass' INTO STRICT distributed;
    END IF;
    IF collection_ids IS NOT NULL OR distributed THEN
        EXECUTE format(
            'SELECT coalesce(sum(ls.n), 0)::float8 FROM pgrag.language_sums ls'
            ' JOIN pgrag.collections c ON c.id = ls.collection_id AND c.active_set_id = ls.set_id'
            ' %s',
            CASE WHEN collection_ids IS NOT NULL
                 THEN format('WHERE ls.collection_id = ANY (%L::bigint[])', collection_ids)
                 ELSE '' END)
        INTO STRICT n;
        RETURN n;
    END IF;
    RETURN (SELECT CASE WHEN c.reltuples > 0 AND c.relpages > 0
                        THEN c.reltuples / c.relpages
                             * greatest(pg_relation_size(c.oid)
                                        / current_setting('block_size')::int, 1)
                        ELSE (SELECT count(*) FROM pgrag.chunks)::float8 END
            FROM pg_class c WHERE c.oid = 'pgrag.chunks'::regclass);
END
$$;

-- The chunks holding each term (terms[k] is term number ordinals[k]) in the collections
-- searched (NULL: every collection): BM25's postings pass. The collection ids are literals
-- so that on Citus the statement is routed to those collections' shards (see
-- pgrag.chunks_by_id). Invoker's rights.
CREATE OR REPLACE FUNCTION pgrag.term_postings(
    terms tsquery[], ordinals bigint[], collection_ids bigint[]
) RETURNS TABLE (i bigint, id bigint, collection_id bigint, document_id uuid)
LANGUAGE plpgsql STABLE ROWS 1000 AS $$
BEGIN
    IF coalesce(cardinality(terms), 0) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT g.i, c.id, c.collection_id, c.document_id'
        ' FROM unnest(%L::tsquery[], %L::bigint[]) AS g(term, i),'
        '      LATERAL (SELECT c.id, c.collection_id, c.document_id FROM pgrag.chunks c'
        '               WHERE c.tsv @@ g.term %s) c',
        terms, ordinals,
        CASE WHEN collection_ids IS NOT NULL
             THEN format('AND c.collection_id = ANY (%L::bigint[])', collection_ids) ELSE '' END);
END
$$;

-- Chunks by id with their tsvector and document, in the collections of the scope: the
-- by-id reads of the lexical leg (rescoring, proximity positions) and of the hybrid page
-- (each hit's document). Built with the collection ids as literals so that on Citus the
-- statement is routed to those collections' shards (Citus refuses a parameter of a generic
-- plan or of a SQL function there: "could not create distributed plan"; without the
-- predicate the statement went to every shard). collection_ids NULL: every collection;
-- with_tsv false: tsv NULL (not read, nor sent from the workers). Invoker's rights: under
-- row-level security the caller sees only its own chunks.
CREATE OR REPLACE FUNCTION pgrag.chunks_by_id(
    ids bigint[], collection_ids bigint[], with_tsv boolean DEFAULT true
) RETURNS TABLE (id bigint, tsv tsvector, document_id uuid)
LANGUAGE plpgsql STABLE ROWS 100 AS $$
BEGIN
    IF coalesce(cardinality(ids), 0) = 0 THEN
        RETURN;  -- no round trip to the shards for nothing
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT c.id, %s, c.document_id FROM pgrag.chunks c WHERE c.id = ANY (%L::bigint[]) %s',
        CASE WHEN with_tsv THEN 'c.tsv' ELSE 'NULL::tsvector' END, ids,
        CASE WHEN collection_ids IS NOT NULL
             THEN format('AND c.collection_id = ANY (%L::bigint[])', collection_ids) ELSE '' END);
END
$$;

CREATE OR REPLACE FUNCTION pgrag.lexical_fallback_in(
    tsq            tsquery,
    terms          tsquery[],
    collection_ids bigint[],
    filters        jsonb,
    scored         bigint[],
    max_rows       int,
    readable       bigint[]
) RETURNS TABLE (id bigint, len int, r float4[], document_id uuid)
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
        '       ARRAY(SELECT ts_rank(''{1,1,1,1}'', c.tsv, t) FROM unnest(%L::tsquery[]) t), '
        '       c.document_id '
        'FROM pgrag.chunks c '
        'JOIN pgrag.documents d ON d.id = c.document_id AND d.collection_id = c.collection_id '
        'WHERE c.tsv @@ %L::tsquery %s %s'
        '  AND pgrag.document_fields_match(d.folder, d.file_type, d.id, d.modified_at, '
        '      d.created_at, d.submitter, d.author, d.tags, %L::jsonb) '
        '  AND NOT (c.id = ANY (%L::bigint[])) '
        'LIMIT %s',
        -- the collection predicates only when there is one, on each table: Citus routes
        -- the statement to the collections' shards, and does not carry a table's
        -- predicate across the join to the other
        terms, tsq,
        CASE WHEN collection_ids IS NOT NULL
             THEN format('AND c.collection_id = ANY (%1$L::bigint[]) '
                         'AND d.collection_id = ANY (%1$L::bigint[]) ', collection_ids) END,
        CASE WHEN readable IS NOT NULL
             THEN format('AND c.collection_id = ANY (%1$L::bigint[]) '
                         'AND d.collection_id = ANY (%1$L::bigint[]) ', readable) END,
        coalesce(filters, '{}'::jsonb), scored, max_rows);
END
$$;

CREATE OR REPLACE FUNCTION pgrag.lexical_candidates_in(
    query_text       text,
    pool_size        int DEFAULT 100,
    collection_ids   bigint[] DEFAULT NULL,
    filters          jsonb DEFAULT '{}'::jsonb,
    bm25_k1          float8 DEFAULT 0.9,
    bm25_b           float8 DEFAULT 0.4,
    candidate_budget float8 DEFAULT 1000,
    rescore_size     int DEFAULT 150,
    readable         bigint[] DEFAULT '{}',  -- NULL: every collection
    proximity_width  int DEFAULT NULL        -- NULL: pgrag.fusion_defaults(); 0: none
) RETURNS TABLE (chunk_id bigint, score float8, coverage float8, rank int, proximity float8)
LANGUAGE plpgsql STABLE ROWS 100
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan  -- plan once per session, not per call
-- postings from the GIN index always beat reading tsvectors (detoasting them is not in the
-- planner's costs, so on a small table it would scan every tsvector once per term)
SET enable_seqscan = off
AS $$
#variable_conflict use_column
DECLARE
    win int := 0;  -- positions per proximity window (0: none)
    searched bigint[];  -- the collections whose statistics count (NULL: every collection)
BEGIN
    IF readable IS NULL AND current_setting('role', true) IS DISTINCT FROM 'none' THEN
        readable := '{}';  -- a caller under SET ROLE is never unrestricted (fail closed)
    END IF;
    searched := CASE WHEN collection_ids IS NULL THEN readable
                     WHEN readable IS NULL THEN collection_ids
                     ELSE ARRAY(SELECT unnest(collection_ids)
                                INTERSECT SELECT unnest(readable)) END;
    proximity_width := coalesce(proximity_width,
                                (SELECT d.proximity_width FROM pgrag.fusion_defaults() d));
    IF proximity_width > 0 THEN
        -- a window holds proximity_width positions, or twice the query's terms when more
        SELECT greatest(proximity_width, 2 * count(*)) INTO win
        FROM pgrag.query_terms(pgrag.lexical_query(query_text));
    END IF;
    RETURN QUERY
    WITH q AS (
        SELECT t.tsq,
               -- a plain OR of terms (the default form): every chunk holding a term matches
               regexp_replace(t.tsq::text, '''([^'']|'''')*''', '', 'g') !~ '[&!<]' AS plain
        FROM (SELECT pgrag.lexical_query(query_text) AS tsq) t
    ),
    n AS (SELECT pgrag.chunk_count_estimate(searched) AS n),
    qterms AS MATERIALIZED (SELECT t.* FROM q CROSS JOIN LATERAL pgrag.query_terms(q.tsq) t),
    -- ANALYZE's sample frequency of the query terms it tracks (the ~1000 commonest lexemes,
    -- table-wide: so only for an unrestricted caller; a scoped key learns nothing of other
    -- collections and counts every term exactly in its own)
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
    -- the chunks of every collection, when a tracked term's postings must be costed: a
    -- term's postings are read table-wide whatever the collections searched (the GIN index
    -- does not know them), so the candidate budget is spent on the whole table's
    -- postings, while the df of a term left out is the frequency scaled to the collections
    -- searched (not read on Citus, where the coordinator's table has no statistics)
    n_all AS (
        SELECT CASE WHEN searched IS NULL THEN (SELECT n.n FROM n)
                    WHEN EXISTS (SELECT 1 FROM st) THEN pgrag.chunk_count_estimate() END AS n
    ),
    ordered AS (
        SELECT t.term, t.lexeme, st.freq * n.n AS est_df,  -- NULL: rarer than any tracked lexeme
               row_number() OVER w AS i, sum(coalesce(st.freq * n_all.n, 0)) OVER w AS cum_df
        FROM qterms t CROSS JOIN n CROSS JOIN n_all LEFT JOIN st ON st.lexeme = t.lexeme
        WINDOW w AS (ORDER BY coalesce(st.freq, 0), t.lexeme)
    ),
    qt AS (
        SELECT array_agg(o.term ORDER BY o.i) AS terms,
               array_agg(o.lexeme ORDER BY o.i) AS lexemes,
               array_agg(o.est_df ORDER BY o.i) AS est_df,
               array_agg(o.est_df IS NULL OR o.i = 1 OR o.cum_df <= candidate_budget
                         ORDER BY o.i) AS generates
        FROM ordered o
    ),
    -- pass 1: postings of the generating terms in the collections searched (their df; on
    -- Citus only their shards)
    hits AS MATERIALIZED (
        SELECT p.i, p.id, p.collection_id, p.document_id
        FROM qt, pgrag.term_postings(
                ARRAY(SELECT g.term FROM unnest(qt.terms, qt.generates) WITH ORDINALITY
                                         AS g(term, generates, i) WHERE g.generates ORDER BY g.i),
                ARRAY(SELECT g.i FROM unnest(qt.generates) WITH ORDINALITY AS g(generates, i)
                      WHERE g.generates ORDER BY g.i),
                searched) p
    ),
    df AS (SELECT h.i, count(*)::float8 AS df FROM hits h GROUP BY h.i),
    idf AS MATERIALIZED (
        -- (N at least df: a count the sums have not caught up with never makes idf < 0)
        SELECT g.i, ln(1 + (greatest(n.n, d.df) - d.df + 0.5) / (d.df + 0.5)) AS idf
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
               OR p.document_id IN (
                   SELECT d.id FROM pgrag.documents d
                   WHERE (collection_ids IS NULL OR d.collection_id = ANY (collection_ids))
                     AND pgrag.document_fields_match(d.folder, d.file_type, d.id, d.modified_at,
                                                     d.created_at, d.submitter, d.author,
                                                     d.tags, filters)))
    ),
    -- pass 2: the best by presence get their tsvector read (detoasted once) and every term
    -- ranked; phrase and negation queries are checked here
    cand AS MATERIALIZED (
        SELECT x.id, length(x.v) AS len,
               ARRAY(SELECT ts_rank('{1,1,1,1}', x.v, t) FROM unnest(qt.terms) t) AS r,
               x.document_id
        FROM qt, q, LATERAL (
            -- in the scope's collections (routed on Citus: pgrag.chunks_by_id)
            SELECT c.id, c.tsv || ''::tsvector AS v, c.document_id
            FROM pgrag.chunks_by_id(ARRAY(SELECT s.id FROM inscope s ORDER BY s.pre DESC, s.id
                                          LIMIT greatest(rescore_size, pool_size)),
                                    collection_ids) c
            OFFSET 0) x
        WHERE q.plain OR x.v @@ q.tsq
    ),
    -- with each chunk's document: joined here with pgrag.chunks, Citus would push the
    -- call down to every shard, where its own query over the shards cannot run
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
        SELECT x.id, x.document_id, s.score, s.matched, s.matched / norm.idf_sum AS coverage
        FROM scoring x, norm, LATERAL (
            SELECT sum(norm.idf[u.i] * u.tf * (bm25_k1 + 1)
                       / (u.tf + bm25_k1 * (1 - bm25_b + bm25_b * x.len / norm.avglen)))
                       AS score,
                   sum(norm.idf[u.i]) AS matched
            -- unnest WITH ORDINALITY, not generate_subscripts + LATERAL: Citus 14.0.1
            -- fails planning the latter ("invalid attnum 3 for relation i")
            FROM (SELECT t.i, 1 / (1.6449340668482264 * (1 - t.rk)) - 0.5 AS tf
                  FROM unnest(x.r) WITH ORDINALITY AS t(rk, i) WHERE t.rk > 0) u) s
    ),
    pool AS MATERIALIZED (
        SELECT s.*, row_number() OVER (ORDER BY s.score DESC, s.id)::int AS rank
        FROM scored s
        ORDER BY s.score DESC, s.id
        LIMIT pool_size
    ),
    -- chunks of documents with more than one chunk in the pool (proximity, above)
    siblings AS MATERIALIZED (
        SELECT x.id, x.document_id FROM (
            SELECT p.id, p.document_id, count(*) OVER (PARTITION BY p.document_id) AS n
            FROM pool p) x
        WHERE x.n > 1 AND win > 0
    ),
    -- where the query's terms stand in them
    pos AS MATERIALIZED (
        SELECT s.id, g.i, w.pos, w.weight = 'A' AS head
        FROM siblings s
        JOIN pgrag.chunks_by_id(ARRAY(SELECT id FROM siblings), collection_ids) c
          ON c.id = s.id
        CROSS JOIN qt
        CROSS JOIN LATERAL unnest(c.tsv) u
        JOIN unnest(qt.lexemes) WITH ORDINALITY AS g(lexeme, i) ON g.lexeme = u.lexeme
        CROSS JOIN LATERAL unnest(u.positions, u.weights) AS w(pos, weight)
    ),
    heads AS (SELECT p.id, array_agg(DISTINCT p.i) AS terms FROM pos p WHERE p.head GROUP BY p.id),
    windows AS (
        SELECT p.id, array_agg(p.i) OVER (PARTITION BY p.id ORDER BY p.pos
                                          RANGE BETWEEN CURRENT ROW AND win - 1 FOLLOWING) AS terms
        FROM pos p WHERE NOT p.head
    ),
    near AS (
        SELECT s.id, s.document_id,
               (SELECT sum(norm.idf[t.i]) FROM (SELECT DISTINCT unnest(coalesce(h.terms, '{}')
                                                 || coalesce(w.terms, '{}')) AS i) t) AS s
        FROM siblings s
        LEFT JOIN heads h ON h.id = s.id
        LEFT JOIN windows w ON w.id = s.id
        CROSS JOIN norm
    ),
    best AS (
        SELECT n.id, n.document_id, max(n.s) / nullif(p.matched, 0) AS closeness
        FROM near n JOIN pool p ON p.id = n.id
        GROUP BY n.id, n.document_id, p.matched
    )
    SELECT p.id, p.score, p.coverage, p.rank,
           coalesce(b.closeness / nullif(max(b.closeness) OVER (PARTITION BY b.document_id), 0),
                    1.0)
    FROM pool p LEFT JOIN best b ON b.id = p.id
    ORDER BY p.rank;
END
$$;

-- The lexical pool as callers (hybrid_fusion, psql) see it: the caller's readable collections
-- passed to the owner-rights scoring function.
CREATE OR REPLACE FUNCTION pgrag.lexical_candidates(
    query_text       text,
    pool_size        int DEFAULT 100,
    collection_ids   bigint[] DEFAULT NULL,
    filters          jsonb DEFAULT '{}'::jsonb,
    bm25_k1          float8 DEFAULT 0.9,
    bm25_b           float8 DEFAULT 0.4,
    candidate_budget float8 DEFAULT 1000,
    rescore_size     int DEFAULT 150,
    proximity_width  int DEFAULT NULL
) RETURNS TABLE (chunk_id bigint, score float8, coverage float8, rank int, proximity float8)
LANGUAGE sql STABLE ROWS 100 AS $$
    SELECT * FROM pgrag.lexical_candidates_in(query_text, pool_size, collection_ids, filters,
                                              bm25_k1, bm25_b, candidate_budget, rescore_size,
                                              pgrag.readable_collections(), proximity_width)
$$;
