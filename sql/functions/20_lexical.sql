-- The lexical leg: BM25 over the stored tsvector (pgrag.chunks.tsv = pgrag.chunk_tsv()).
--
--   score(d) = sum over query terms t in d of pgrag.bm25_score(tf, idf(t), len(d), avglen, k1, b)
--            = idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avglen))
--   idf(t)   = ln(1 + (N - df + 0.5) / (df + 0.5))                       (pgrag.bm25_idf)
--   tf       term frequency, recovered from ts_rank(tsv, t) (pgrag.term_frequency)
--   len(d)   distinct lexemes of the chunk; avglen their mean over the candidates
--   k1, b, candidate_budget, rescore_size: fields of the `opts` argument (pgrag.ranking_options,
--            pgrag.ranking_defaults() unless the caller passes other options)
--   N, df    over the collections searched: those the search names, else every collection
--            the caller can read (pgrag.chunk_count_estimate). df comes from the sums the
--            writers keep exact per collection (migration 0023, 25_bm25_sums.sql), summed
--            over the collections searched (all of them for an unrestricted caller); N from
--            the same sums, or the planner's estimate over every collection on one server.
--            No frequency is counted from the postings, and a search of one collection, by
--            a scoped key or an unscoped caller, ranks as if it were alone in the database.
--
-- Candidates, in two passes so that a query costs about a microsecond per posting and not
-- a tsvector read per matching chunk: (1) the GIN postings of the generating terms give a
-- presence score sum(idf) per chunk in scope; (2) the rescore_size best by presence get the
-- full BM25 above with every query term. Generating terms are the rarest (by exact df)
-- while their postings stay within candidate_budget: chunks holding only the commonest
-- terms score little under BM25. The budget bounds the work, not the hits: while fewer than
-- pool_size chunks of the collections searched hold a generating term, the next rarest
-- term generates too (pgrag.bm25_pool_candidates); else a rare term followed by terms past
-- the budget leaves a pool of the rare term's few chunks. Such a term, or a rarest term,
-- in more than candidate_budget chunks is capped (pgrag.capped_postings): only that many
-- of its chunks are read, those holding the most other query terms first, so the heap rows
-- a search reads do not grow with the table (a row costs ~6 us, a posting in the GIN index
-- ~0.2-0.4 us, at 300,000 chunks). When the scope (collections, filters) or a
-- phrase/negation query leaves fewer than pool_size candidates, the other chunks in scope
-- that match the query are scored too (pgrag.lexical_fallback_in, planned with the
-- literal filters).
--
-- proximity: which of a document's chunks holds the query's words closest together, for
-- the fusion (the BM25 score ignores it): pgrag.bm25_proximity.
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
--
-- The reads of pgrag.chunks by collection (postings, chunks by id, the fallback, N) are
-- in 15_routing.sql.

-- A query's tsquery. websearch_to_tsquery would turn a compound ("IL-1",
-- "pattern-recognition") into a phrase ('il' <-> '-1'), making an otherwise OR-ed query a
-- phrase query: BM25 candidates would have to contain the exact compound, and the fallback
-- would score up to 10 x pool_size more chunks. Plain queries are therefore OR-ed term by
-- term; quoted phrases and negations keep websearch's semantics.
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


-- pi^2/6: ts_rank with unit weights gives a term occurring tf times in a chunk
-- sum(1/i^2, i = 1..tf) / (pi^2/6) (tsrank.c, calc_rank_or).
CREATE OR REPLACE FUNCTION pgrag.ts_rank_scale() RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 1.6449340668482264::float8
$$;

-- A term's frequency in a chunk from its ts_rank('{1,1,1,1}', tsv, term): the sum above
-- inverted by its tail, 1 - r ~ 1 / ((pi^2/6) (tf + 0.5)).
CREATE OR REPLACE FUNCTION pgrag.term_frequency(rank float4) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 1 / (pgrag.ts_rank_scale() * (1 - rank)) - 0.5
$$;

-- idf of a term found in df of n chunks (n at least df: a count the sums have not caught up
-- with never makes idf < 0).
CREATE OR REPLACE FUNCTION pgrag.bm25_idf(n float8, df float8) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ln(1 + (greatest(n, df) - df + 0.5) / (df + 0.5))
$$;

-- One term's BM25 contribution to a chunk's score.
CREATE OR REPLACE FUNCTION pgrag.bm25_score(
    tf float8, idf float8, doc_len float8, avg_len float8, k1 float8, b float8
) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avg_len))
$$;

-- A plain OR of terms (the default form of pgrag.lexical_query): every chunk holding a
-- term matches, so candidates need no check against the whole query.
CREATE OR REPLACE FUNCTION pgrag.is_plain_or(tsq tsquery) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT regexp_replace(tsq::text, '''([^'']|'''')*''', '', 'g') !~ '[&!<]'
$$;

-- The collections whose statistics count: those named that the caller can read (NULL
-- for either: no restriction from it; both NULL: every collection).
CREATE OR REPLACE FUNCTION pgrag.searched_collections(collection_ids bigint[], readable bigint[])
RETURNS bigint[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN collection_ids IS NULL THEN readable
                WHEN readable IS NULL THEN collection_ids
                ELSE ARRAY(SELECT unnest(collection_ids) INTERSECT SELECT unnest(readable)) END
$$;

-- The query's terms, numbered rarest first, with their df in the collections searched
-- (every collection when NULL), exact, from the sums the writers keep (pgrag.bm25_term_df),
-- and whether their postings generate candidates: those of the rarest terms while their
-- postings stay within candidate_budget, and the least_terms rarest whatever their cost.
-- A term none of those chunks holds generates nothing. A generating term holding more than
-- candidate_budget chunks is capped: at most candidate_budget of its chunks are read, those
-- holding the most other query terms first (pgrag.capped_postings), so that the rows read
-- per search do not grow with the collection.
CREATE OR REPLACE FUNCTION pgrag.bm25_terms(
    tsq tsquery, searched bigint[], candidate_budget float8, least_terms bigint
) RETURNS TABLE (i bigint, term tsquery, lexeme text, df float8, generates boolean,
                 capped boolean)
LANGUAGE sql STABLE ROWS 10 AS $$
    WITH query_terms AS MATERIALIZED (SELECT t.* FROM pgrag.query_terms(tsq) t),
    kept AS MATERIALIZED (
        SELECT k.* FROM pgrag.bm25_term_df(
            collection_ids => searched, lexemes => ARRAY(SELECT qt.lexeme FROM query_terms qt)) k
    ),
    rarest_first AS (
        SELECT qt.term, qt.lexeme, coalesce(k.df, 0) AS df,
               row_number() OVER o AS i, sum(coalesce(k.df, 0)) OVER o AS postings
        FROM query_terms qt LEFT JOIN kept k ON k.lexeme = qt.lexeme
        WINDOW o AS (ORDER BY coalesce(k.df, 0), qt.lexeme)
    ),
    generating AS (
        SELECT r.*, r.df > 0 AND (r.i <= least_terms OR r.postings <= candidate_budget) AS gen
        FROM rarest_first r
    )
    SELECT g.i, g.term, g.lexeme, g.df, g.gen, g.gen AND g.df > candidate_budget
    FROM generating g
    ORDER BY g.i
$$;

-- Chunks by id (in the collections of the scope) with their length and each term's
-- ts_rank; unless the query is a plain OR (plain), those not matching it are left out:
-- the rescoring pass.
CREATE OR REPLACE FUNCTION pgrag.bm25_term_ranks(
    ids bigint[], collection_ids bigint[], terms tsquery[], tsq tsquery, plain boolean
) RETURNS TABLE (id bigint, len int, r float4[], document_id uuid)
LANGUAGE sql STABLE ROWS 100 AS $$
    SELECT x.id, length(x.v), ARRAY(SELECT ts_rank('{1,1,1,1}', x.v, t) FROM unnest(terms) t),
           x.document_id
    FROM (SELECT c.id, c.tsv || ''::tsvector AS v, c.document_id  -- detoasted once
          FROM pgrag.chunks_by_id(ids => ids, collection_ids => collection_ids) c OFFSET 0) x
    WHERE plain OR x.v @@ tsq
$$;

-- How close together each pooled chunk holds the query's words, for the fusion. For a
-- chunk whose document has other chunks in the pool: the best window of `width`
-- consecutive body positions, counting the idf of each distinct query term in it plus those
-- of the chunk's heading (weight A: title and section stand next to every word of the
-- body), over the idf of all the chunk's matched terms (`matched`); then divided by the
-- best such value among the document's chunks. NULL (1 for the fusion) for a document's
-- only chunk in the pool: documents of one chunk (passage collections such as SciFact) are
-- ranked as without it, at no cost. It shows the row holding a SKU together with the
-- asked-for warehouse before the row block holding the same SKU and the warehouse in other
-- rows (benchmarks/docbench).
CREATE OR REPLACE FUNCTION pgrag.bm25_proximity(
    ids bigint[], document_ids uuid[], matched float8[], lexemes text[], idf float8[],
    width int, collection_ids bigint[]
) RETURNS TABLE (id bigint, proximity float8)
LANGUAGE sql STABLE ROWS 100 AS $$
    WITH pooled AS (
        SELECT * FROM unnest(ids, document_ids, matched) AS p(id, document_id, matched)
    ),
    siblings AS MATERIALIZED (
        SELECT x.id, x.document_id FROM (
            SELECT p.id, p.document_id, count(*) OVER (PARTITION BY p.document_id) AS n
            FROM pooled p) x
        WHERE x.n > 1 AND width > 0
    ),
    positions AS MATERIALIZED (
        SELECT s.id, g.i, w.pos, w.weight = 'A' AS head
        FROM siblings s
        JOIN pgrag.chunks_by_id(ids => ARRAY(SELECT id FROM siblings),
                                collection_ids => collection_ids) c ON c.id = s.id
        CROSS JOIN LATERAL unnest(c.tsv) u
        JOIN unnest(lexemes) WITH ORDINALITY AS g(lexeme, i) ON g.lexeme = u.lexeme
        CROSS JOIN LATERAL unnest(u.positions, u.weights) AS w(pos, weight)
    ),
    heading_terms AS (
        SELECT p.id, array_agg(DISTINCT p.i) AS terms FROM positions p WHERE p.head GROUP BY p.id
    ),
    window_terms AS (
        SELECT p.id, array_agg(p.i) OVER (PARTITION BY p.id ORDER BY p.pos
                                          RANGE BETWEEN CURRENT ROW AND width - 1 FOLLOWING)
                   AS terms
        FROM positions p WHERE NOT p.head
    ),
    window_idf AS (
        SELECT s.id, s.document_id,
               (SELECT sum(idf[t.i]) FROM (SELECT DISTINCT unnest(coalesce(h.terms, '{}')
                                           || coalesce(w.terms, '{}')) AS i) t) AS idf
        FROM siblings s
        LEFT JOIN heading_terms h ON h.id = s.id
        LEFT JOIN window_terms w ON w.id = s.id
    ),
    closeness AS (
        SELECT w.id, w.document_id, max(w.idf) / nullif(p.matched, 0) AS closeness
        FROM window_idf w JOIN pooled p ON p.id = w.id
        GROUP BY w.id, w.document_id, p.matched
    )
    SELECT c.id, c.closeness / nullif(max(c.closeness) OVER (PARTITION BY c.document_id), 0)
    FROM closeness c
$$;

-- Pass 1: the postings of the generating terms in the collections searched give each chunk
-- holding one a presence score, the sum of their idf (for a capped term's chunks, of every
-- query term its tier shows they hold: pgrag.capped_postings); the best `top` by presence in
-- scope (collections, filters) are the candidates. One row: the query's terms, lexemes and
-- idf (numbered rarest first: pgrag.bm25_terms), the candidates' ids, how many chunks hold a
-- generating term in the collections searched (those read, plus each capped term's chunks
-- past the budget: more than were read whenever a term was capped, so that the fallback
-- still runs for a scope left short), and the first term that could generate more but does
-- not (NULL: none).
CREATE OR REPLACE FUNCTION pgrag.bm25_candidates(
    tsq tsquery, searched bigint[], chunks float8, candidate_budget float8,
    collection_ids bigint[], filters jsonb, top int, least_terms bigint
) RETURNS TABLE (terms tsquery[], lexemes text[], idf float8[], ids bigint[], found bigint,
                 next_term bigint)
LANGUAGE sql STABLE AS $$
    WITH query_terms AS MATERIALIZED (
        SELECT * FROM pgrag.bm25_terms(tsq => tsq, searched => searched,
                                       candidate_budget => candidate_budget,
                                       least_terms => least_terms)
    ),
    postings AS MATERIALIZED (
        SELECT p.* FROM pgrag.term_postings(
            terms => ARRAY(SELECT t.term FROM query_terms t
                           WHERE t.generates AND NOT t.capped ORDER BY t.i),
            ordinals => ARRAY(SELECT t.i FROM query_terms t
                              WHERE t.generates AND NOT t.capped ORDER BY t.i),
            collection_ids => searched) p
        UNION ALL
        SELECT p.* FROM query_terms c, LATERAL pgrag.capped_postings(
            term => c.term, ordinal => c.i, df => c.df,
            others => ARRAY(SELECT o.term FROM query_terms o WHERE o.i > c.i AND o.df > 0
                            ORDER BY o.i),
            other_ordinals => ARRAY(SELECT o.i FROM query_terms o WHERE o.i > c.i AND o.df > 0
                                    ORDER BY o.i),
            other_df => ARRAY(SELECT o.df FROM query_terms o WHERE o.i > c.i AND o.df > 0
                              ORDER BY o.i),
            read => ARRAY(SELECT r.term FROM query_terms r WHERE r.generates AND r.i < c.i),
            chunks => chunks, collection_ids => searched, max_rows => candidate_budget::int) p
        WHERE c.capped
    ),
    term_idf AS MATERIALIZED (
        SELECT t.i, t.term, t.lexeme, pgrag.bm25_idf(n => chunks, df => t.df) AS idf
        FROM query_terms t
    ),
    presence AS MATERIALIZED (
        SELECT p.id, p.collection_id, p.document_id, sum(ti.idf) AS presence
        FROM postings p JOIN term_idf ti ON ti.i = p.i
        GROUP BY p.id, p.collection_id, p.document_id
    ),
    in_scope AS MATERIALIZED (
        SELECT p.id, p.presence FROM presence p
        WHERE (collection_ids IS NULL OR p.collection_id = ANY (collection_ids))
          AND (filters IS NULL OR filters = '{}'::jsonb
               OR p.document_id IN (SELECT pgrag.documents_matching(
                                        collection_ids => collection_ids, filters => filters)))
    )
    SELECT (SELECT array_agg(t.term ORDER BY t.i) FROM term_idf t),
           (SELECT array_agg(t.lexeme ORDER BY t.i) FROM term_idf t),
           (SELECT array_agg(t.idf ORDER BY t.i) FROM term_idf t),
           ARRAY(SELECT s.id FROM in_scope s ORDER BY s.presence DESC, s.id LIMIT top),
           (SELECT count(*) FROM presence)
           + (SELECT coalesce(sum(t.df - candidate_budget), 0)::bigint FROM query_terms t
              WHERE t.capped),
           (SELECT min(t.i) FROM query_terms t WHERE NOT t.generates AND t.df > 0)
$$;

-- Pass 1 with enough candidates: the generating terms of pgrag.bm25_candidates, and the
-- next rarest ones while fewer than pool_size chunks of the collections searched hold one
-- (the candidate budget bounds the work, not the number of hits). Usually one call.
CREATE OR REPLACE FUNCTION pgrag.bm25_pool_candidates(
    tsq tsquery, searched bigint[], chunks float8, candidate_budget float8,
    collection_ids bigint[], filters jsonb, top int, pool_size int
) RETURNS TABLE (terms tsquery[], lexemes text[], idf float8[], ids bigint[], found bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    least_terms bigint := 1;
    pass1 record;
BEGIN
    LOOP
        SELECT * INTO pass1
        FROM pgrag.bm25_candidates(
            tsq => tsq, searched => searched, chunks => chunks,
            candidate_budget => candidate_budget, collection_ids => collection_ids,
            filters => filters, top => top, least_terms => least_terms);
        EXIT WHEN pass1.found >= pool_size OR pass1.next_term IS NULL;
        least_terms := pass1.next_term;
    END LOOP;
    RETURN QUERY SELECT pass1.terms, pass1.lexemes, pass1.idf, pass1.ids, pass1.found;
END
$$;

-- The lexical pool: the pool_size best chunks by BM25 in the collections searched, with
-- their coverage (the idf of their matched terms over that of all query terms) and
-- proximity; the BM25 options are fields of `opts` (proximity_width 0: no proximity).
CREATE OR REPLACE FUNCTION pgrag.lexical_candidates_in(
    query_text     text,
    collection_ids bigint[] DEFAULT NULL,
    filters        jsonb DEFAULT '{}'::jsonb,
    opts           pgrag.ranking_options DEFAULT pgrag.ranking_defaults(),
    readable       bigint[] DEFAULT '{}'  -- NULL: every collection
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
    tsq tsquery := pgrag.lexical_query(query_text);
    plain boolean := pgrag.is_plain_or(tsq);
    searched bigint[];  -- the collections whose statistics count (NULL: every collection)
    chunks float8;      -- BM25's N
    width int := 0;     -- positions per proximity window (0: none)
    pass1 record;       -- pgrag.bm25_pool_candidates
BEGIN
    IF readable IS NULL AND current_setting('role', true) IS DISTINCT FROM 'none' THEN
        readable := '{}';  -- a caller under SET ROLE is never unrestricted (fail closed)
    END IF;
    searched := pgrag.searched_collections(collection_ids => collection_ids, readable => readable);
    chunks := pgrag.chunk_count_estimate(searched);
    IF opts.proximity_width > 0 THEN
        -- a window holds proximity_width positions, or twice the query's terms when more
        SELECT greatest(opts.proximity_width, 2 * count(*)) INTO width
        FROM pgrag.query_terms(tsq);
    END IF;
    SELECT * INTO pass1
    FROM pgrag.bm25_pool_candidates(
        tsq => tsq, searched => searched, chunks => chunks,
        candidate_budget => opts.candidate_budget, collection_ids => collection_ids,
        filters => filters,
        top => greatest(opts.rescore_size, opts.pool_size), pool_size => opts.pool_size);
    RETURN QUERY
    -- pass 2: the candidates get every term ranked
    WITH rescored AS MATERIALIZED (
        SELECT r.* FROM pgrag.bm25_term_ranks(ids => pass1.ids, collection_ids => collection_ids,
                                              terms => pass1.terms, tsq => tsq, plain => plain) r
    ),
    fallback AS MATERIALIZED (
        SELECT f.* FROM pgrag.lexical_fallback_in(
            tsq => tsq, terms => pass1.terms, collection_ids => collection_ids, filters => filters,
            scored => ARRAY(SELECT id FROM rescored), max_rows => 10 * opts.pool_size,
            readable => readable) f
        WHERE (SELECT count(*) FROM rescored) < opts.pool_size
          AND (SELECT count(*) FROM rescored) < pass1.found
    ),
    ranked_terms AS (SELECT * FROM rescored UNION ALL SELECT * FROM fallback),
    query_idf AS (
        SELECT (SELECT sum(x) FROM unnest(pass1.idf) x) AS total,
               (SELECT avg(len) FROM ranked_terms)::float8 AS avg_len
    ),
    scored AS (
        SELECT x.id, x.document_id, s.score, s.matched, s.matched / qi.total AS coverage
        FROM ranked_terms x, query_idf qi, LATERAL (
            SELECT sum(pgrag.bm25_score(tf => u.tf, idf => pass1.idf[u.i], doc_len => x.len,
                                        avg_len => qi.avg_len, k1 => opts.bm25_k1,
                                        b => opts.bm25_b))
                       AS score,
                   sum(pass1.idf[u.i]) AS matched
            FROM (SELECT t.i, pgrag.term_frequency(t.rk) AS tf
                  FROM unnest(x.r) WITH ORDINALITY AS t(rk, i) WHERE t.rk > 0) u) s
    ),
    pool AS MATERIALIZED (
        SELECT s.*, row_number() OVER (ORDER BY s.score DESC, s.id)::int AS rank
        FROM scored s
        ORDER BY s.score DESC, s.id
        LIMIT opts.pool_size
    ),
    proximity AS (
        SELECT c.* FROM (
            SELECT array_agg(x.id ORDER BY x.rank) AS ids,
                   array_agg(x.document_id ORDER BY x.rank) AS document_ids,
                   array_agg(x.matched ORDER BY x.rank) AS matched
            FROM pool x) a,
            pgrag.bm25_proximity(ids => a.ids, document_ids => a.document_ids, matched => a.matched,
                                 lexemes => pass1.lexemes, idf => pass1.idf, width => width,
                                 collection_ids => collection_ids) c
    )
    SELECT p.id, p.score, p.coverage, p.rank, coalesce(c.proximity, 1.0)
    FROM pool p LEFT JOIN proximity c ON c.id = p.id
    ORDER BY p.rank;
END
$$;

-- The lexical pool as callers (hybrid_fusion, psql) see it: the caller's readable collections
-- passed to the owner-rights scoring function.
CREATE OR REPLACE FUNCTION pgrag.lexical_candidates(
    query_text     text,
    collection_ids bigint[] DEFAULT NULL,
    filters        jsonb DEFAULT '{}'::jsonb,
    opts           pgrag.ranking_options DEFAULT pgrag.ranking_defaults()
) RETURNS TABLE (chunk_id bigint, score float8, coverage float8, rank int, proximity float8)
LANGUAGE sql STABLE ROWS 100 AS $$
    SELECT * FROM pgrag.lexical_candidates_in(
        query_text => query_text, collection_ids => collection_ids, filters => filters,
        opts => opts, readable => pgrag.readable_collections())
$$;
