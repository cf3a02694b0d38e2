-- BM25's statistics per collection (migration 0023): chunk count, total length and each
-- lexeme's document frequency, as rows appended per statement by the triggers on
-- pgrag.chunks (single server) or by the writer (Citus: pgrag.write_bm25_sums), folded
-- here. The lexical leg reads them through pgrag.bm25_collection_totals and
-- pgrag.bm25_term_df (15_routing.sql).

-- Add (p_sign 1) or subtract (-1) one document's chunks to its collection's sums: what the
-- triggers on pgrag.chunks do on a single server. Citus runs no such triggers, so there
-- the writer calls this after inserting a version's chunks and before deleting them; with
-- the triggers in place it does nothing.
CREATE OR REPLACE FUNCTION pgrag.write_bm25_sums(
    p_collection_id bigint, p_document_id uuid, p_sign int
) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'pgrag.chunks'::regclass
               AND tgname = 'chunks_bm25_added') THEN
        RETURN;
    END IF;
    INSERT INTO pgrag.bm25_collection_sums (collection_id, chunks, total_length)
    SELECT c.collection_id, p_sign * count(*), p_sign * sum(length(c.tsv))
    FROM pgrag.chunks c
    WHERE c.collection_id = p_collection_id AND c.document_id = p_document_id
    GROUP BY c.collection_id;
    INSERT INTO pgrag.bm25_term_sums (collection_id, lexeme, df)
    SELECT c.collection_id, l.lexeme, p_sign * count(*)
    FROM pgrag.chunks c, unnest(tsvector_to_array(c.tsv)) AS l(lexeme)
    WHERE c.collection_id = p_collection_id AND c.document_id = p_document_id
    GROUP BY c.collection_id, l.lexeme;
END
$$;

-- Fold one collection's sums into one row (and one per lexeme): every row of the
-- collection out and their sums back in, in one pass (a semi-join on the lexemes with
-- several rows can be planned as a nested loop over a table that grew since its last
-- ANALYZE: minutes after a large ingest). Rows appended meanwhile by other transactions
-- are not in this statement's snapshot and stay; a concurrent fold skips the rows this one
-- deleted. The number of rows fewer.
CREATE OR REPLACE FUNCTION pgrag.compact_collection_bm25_sums(p_collection_id bigint)
RETURNS int
-- plpgsql, not sql: Citus routes each statement by its collection_id value
LANGUAGE plpgsql AS $$
DECLARE
    folded int;
    terms int;
BEGIN
    WITH gone AS (
        DELETE FROM pgrag.bm25_collection_sums s WHERE s.collection_id = p_collection_id
        RETURNING s.chunks, s.total_length
    ), ins AS (
        INSERT INTO pgrag.bm25_collection_sums (collection_id, chunks, total_length)
        SELECT p_collection_id, sum(g.chunks), sum(g.total_length) FROM gone g
        HAVING count(*) > 0 AND (sum(g.chunks) <> 0 OR sum(g.total_length) <> 0)
        RETURNING 1
    ), kept AS (SELECT count(*) AS n FROM ins)
    SELECT count(*) - (SELECT n FROM kept) INTO folded FROM gone;
    WITH gone AS (
        DELETE FROM pgrag.bm25_term_sums t WHERE t.collection_id = p_collection_id
        RETURNING t.lexeme, t.df
    ), ins AS (
        INSERT INTO pgrag.bm25_term_sums (collection_id, lexeme, df)
        SELECT p_collection_id, g.lexeme, sum(g.df) FROM gone g
        GROUP BY g.lexeme HAVING sum(g.df) <> 0
        RETURNING 1
    ), kept AS (SELECT count(*) AS n FROM ins)
    SELECT count(*) - (SELECT n FROM kept) INTO terms FROM gone;
    RETURN folded + terms;
END
$$;

-- Fold a collection's sums (NULL: every collection's) and drop those of deleted
-- collections. Called after ingestion runs; harmless at any time.
CREATE OR REPLACE FUNCTION pgrag.compact_bm25_sums(p_collection_id bigint DEFAULT NULL)
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    folded int := 0;
    cid bigint;
BEGIN
    IF p_collection_id IS NULL THEN
        DELETE FROM pgrag.bm25_collection_sums s
        WHERE NOT EXISTS (SELECT 1 FROM pgrag.collections c WHERE c.id = s.collection_id);
        DELETE FROM pgrag.bm25_term_sums t
        WHERE NOT EXISTS (SELECT 1 FROM pgrag.collections c WHERE c.id = t.collection_id);
    END IF;
    -- one statement per collection (on Citus: per shard), not a function in a query
    FOR cid IN SELECT c.id FROM pgrag.collections c
               WHERE p_collection_id IS NULL OR c.id = p_collection_id LOOP
        folded := folded + pgrag.compact_collection_bm25_sums(cid);
    END LOOP;
    RETURN folded;
END
$$;

-- Recount a collection's sums from its chunks (repair; the sums are exact without it).
CREATE OR REPLACE FUNCTION pgrag.recount_bm25_sums(p_collection_id bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM pgrag.bm25_collection_sums WHERE collection_id = p_collection_id;
    DELETE FROM pgrag.bm25_term_sums WHERE collection_id = p_collection_id;
    INSERT INTO pgrag.bm25_collection_sums (collection_id, chunks, total_length)
    SELECT p_collection_id, count(*), coalesce(sum(length(c.tsv)), 0)
    FROM pgrag.chunks c WHERE c.collection_id = p_collection_id;
    INSERT INTO pgrag.bm25_term_sums (collection_id, lexeme, df)
    SELECT p_collection_id, l.lexeme, count(*)
    FROM pgrag.chunks c, unnest(tsvector_to_array(c.tsv)) AS l(lexeme)
    WHERE c.collection_id = p_collection_id
    GROUP BY l.lexeme;
END
$$;
