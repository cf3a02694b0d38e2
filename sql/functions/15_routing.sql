-- The lexical leg's reads of pgrag.chunks by collection: the only SQL that knows about
-- Citus. Each names the collections searched as literals, so that on Citus a scoped search
-- reads those collections' shards only (why literals, and why a predicate on each table:
-- docs/scale-out.md, "Routing a scoped search"). Invoker's rights: under row-level security
-- the caller sees only its own chunks. A disabled chunk (disabled_at set, migration 0032) is
-- no candidate: the postings and the fallback skip it, a test on the heap row each reads.

-- `AND <alias>.collection_id = ANY ('{...}'::bigint[])`, or nothing when every collection
-- is searched (NULL).
CREATE OR REPLACE FUNCTION pgrag.in_collections(alias text, collection_ids bigint[])
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN collection_ids IS NULL THEN ''
                ELSE format('AND %I.collection_id = ANY (%L::bigint[]) ', alias, collection_ids)
           END
$$;

-- BM25's collection statistics of the collections searched (NULL: every collection), from
-- the sums the writers keep in the chunks' own transaction (25_bm25_sums.sql): their chunks
-- and the sum of the chunks' lengths (distinct lexemes).
CREATE OR REPLACE FUNCTION pgrag.bm25_collection_totals(collection_ids bigint[])
RETURNS TABLE (chunks float8, total_length float8)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY EXECUTE
        'SELECT coalesce(sum(s.chunks), 0)::float8, coalesce(sum(s.total_length), 0)::float8'
        ' FROM pgrag.bm25_collection_sums s WHERE true '
        || pgrag.in_collections('s', collection_ids);
END
$$;

-- Each lexeme's document frequency in the collections searched (NULL: every collection),
-- from the same sums: one row per lexeme some chunk there holds.
CREATE OR REPLACE FUNCTION pgrag.bm25_term_df(collection_ids bigint[], lexemes text[])
RETURNS TABLE (lexeme text, df float8)
LANGUAGE plpgsql STABLE ROWS 10 AS $$
BEGIN
    IF coalesce(cardinality(lexemes), 0) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT s.lexeme, sum(s.df)::float8 FROM pgrag.bm25_term_sums s'
        ' WHERE s.lexeme = ANY (%L::text[]) %s GROUP BY s.lexeme HAVING sum(s.df) > 0',
        lexemes, pgrag.in_collections('s', collection_ids));
END
$$;

-- Chunks in the collections searched (NULL: every collection), BM25's N. Of some
-- collections, and of every collection on Citus (whose coordinator table has no
-- statistics): the sums above, exact. Of every collection on one server:
-- pg_class.reltuples scaled to the current number of pages, as the planner estimates it (a
-- count before the first ANALYZE).
CREATE OR REPLACE FUNCTION pgrag.chunk_count_estimate(collection_ids bigint[] DEFAULT NULL)
RETURNS float8
LANGUAGE plpgsql STABLE AS $$
DECLARE
    distributed boolean := false;
BEGIN
    IF collection_ids IS NULL AND to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT count(*) > 0 FROM pg_catalog.pg_dist_partition'
                ' WHERE logicalrelid = ''pgrag.chunks''::regclass' INTO STRICT distributed;
    END IF;
    IF collection_ids IS NOT NULL OR distributed THEN
        RETURN (SELECT t.chunks FROM pgrag.bm25_collection_totals(collection_ids) t);
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
-- searched (NULL: every collection): BM25's postings pass.
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
        '               WHERE c.tsv @@ g.term AND c.disabled_at IS NULL %s) c',
        terms, ordinals, pgrag.in_collections('c', collection_ids));
END
$$;

-- At most max_rows chunks holding `term` (number `ordinal`, in df chunks of `chunks`) and
-- none of the rarer generating terms `read` (their chunks are read by their own postings or
-- tiers), in the collections searched: those holding the most of the `others` (the
-- commoner query terms, rarest first, in other_df chunks) first. Tier k holds term and
-- others[1..k] but not others[k + 1], so the tiers part the term's chunks; each is one GIN
-- scan with term required (it walks the term's postings: a posting costs the index little,
-- a heap row much more), its rows fetched only up to the rows still allowed. The first
-- tier is the one above the deepest that is expected (terms independent) to fill max_rows
-- alone, without its negation: it holds every higher tier, so a search walks the term's
-- postings about twice, not once per tier. One row per chunk and per term its tier shows
-- it holds.
CREATE OR REPLACE FUNCTION pgrag.capped_postings(
    term tsquery, ordinal bigint, df float8, others tsquery[], other_ordinals bigint[],
    other_df float8[], read tsquery[], chunks float8, collection_ids bigint[], max_rows int
) RETURNS TABLE (i bigint, id bigint, collection_id bigint, document_id uuid)
LANGUAGE plpgsql STABLE ROWS 1000 AS $$
DECLARE
    tiers int := least(coalesce(cardinality(others), 0), 6);
    first int := 0;
    expected float8 := df;
    base tsquery := term;
    tier tsquery;
    got int;
BEGIN
    FOR j IN 1..tiers LOOP
        expected := expected * least(1, other_df[j] / greatest(chunks, 1));
        EXIT WHEN expected < max_rows;
        first := j;
    END LOOP;
    first := least(tiers, first + 1);
    IF coalesce(cardinality(read), 0) > 0 THEN
        base := base && (!! (SELECT string_agg(r::text, ' | ')::tsquery FROM unnest(read) r));
    END IF;
    FOR k IN REVERSE first..0 LOOP
        EXIT WHEN max_rows <= 0;
        tier := base;
        FOR j IN 1..k LOOP
            tier := tier && others[j];
        END LOOP;
        IF k < first THEN
            tier := tier && (!! others[k + 1]);
        END IF;
        RETURN QUERY EXECUTE format(
            'SELECT g.i, c.id, c.collection_id, c.document_id'
            ' FROM (SELECT c.id, c.collection_id, c.document_id FROM pgrag.chunks c'
            '       WHERE c.tsv @@ %L::tsquery AND c.disabled_at IS NULL %s LIMIT %s) c,'
            '      unnest(%L::bigint[]) AS g(i)',
            tier, pgrag.in_collections('c', collection_ids), max_rows,
            ordinal || other_ordinals[1:k]);
        GET DIAGNOSTICS got = ROW_COUNT;
        max_rows := max_rows - got / (k + 1);
    END LOOP;
END
$$;

-- Chunks by id with their tsvector and document, in the collections of the scope: the
-- by-id reads of the lexical leg (rescoring, proximity positions) and of the hybrid page
-- (each hit's document). with_tsv false: tsv NULL (not read, nor sent from the workers).
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
        pgrag.in_collections('c', collection_ids));
END
$$;

-- A collection's disabled chunks (migration 0032), for the semantic leg to leave out: one
-- probe of the partial index chunks_disabled_idx, an empty array when none is disabled.
-- The collection as a literal, a statement of its own (never inlined into the caller's):
-- on Citus, routed to the collection's one shard.
CREATE OR REPLACE FUNCTION pgrag.disabled_chunks(p_collection_id bigint) RETURNS bigint[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
    ids bigint[];
BEGIN
    EXECUTE format('SELECT ARRAY(SELECT c.id FROM pgrag.chunks c'
                   ' WHERE c.disabled_at IS NOT NULL AND c.collection_id = %s)', p_collection_id)
    INTO ids;
    RETURN ids;
END
$$;

-- The documents of the collections searched (NULL: every collection) that the filters
-- keep (pgrag.document_fields_match): the lexical leg's filter on its candidates.
CREATE OR REPLACE FUNCTION pgrag.documents_matching(collection_ids bigint[], filters jsonb)
RETURNS SETOF uuid
LANGUAGE plpgsql STABLE ROWS 100 AS $$
BEGIN
    RETURN QUERY EXECUTE format(
        'SELECT d.id FROM pgrag.documents d'
        ' WHERE pgrag.document_fields_match(d.folder, d.file_type, d.id, d.modified_at,'
        '       d.created_at, d.submitter, d.author, d.tags, %L::jsonb, d.metadata) %s',
        coalesce(filters, '{}'::jsonb), pgrag.in_collections('d', collection_ids));
END
$$;

-- The chunks in scope matching tsq that the postings pass did not score (`scored`), at
-- most max_rows, with their length and each term's ts_rank: the lexical leg's fallback
-- when the scope or a phrase/negation query leaves it short of candidates. Owner's rights
-- (see pgrag.lexical_candidates_in), restricted to `readable` (NULL: every collection).
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
        'WHERE c.tsv @@ %L::tsquery AND c.disabled_at IS NULL %s %s %s %s'
        '  AND pgrag.document_fields_match(folder => d.folder, file_type => d.file_type, '
        '      id => d.id, modified_at => d.modified_at, created_at => d.created_at, '
        '      submitter => d.submitter, author => d.author, tags => d.tags, '
        '      filters => %L::jsonb, metadata => d.metadata) '
        '  AND NOT (c.id = ANY (%L::bigint[])) '
        'LIMIT %s',
        terms, tsq,
        pgrag.in_collections('c', collection_ids), pgrag.in_collections('d', collection_ids),
        pgrag.in_collections('c', readable), pgrag.in_collections('d', readable),
        coalesce(filters, '{}'::jsonb), scored, max_rows);
END
$$;
