-- BM25 statistics per collection: chunk count, total length (distinct lexemes per chunk) and
-- each lexeme's document frequency, kept exact by the writers in the chunks' own
-- transaction, so that a search limited to some collections (a scoped key or a collection
-- filter) reads its statistics from a few rows instead of counting postings table-wide
-- (sql/functions/25_bm25_sums.sql reads and compacts them).
--
-- As pgrag.language_sums: one row per statement and collection (and lexeme) that inserted
-- (> 0) or deleted (< 0) chunks. Appends never wait on each other: two ingests into one
-- collection take no row lock on a shared counter; pgrag.compact_bm25_sums() folds the
-- rows into one per collection (and lexeme). On a single server the triggers below write
-- them; on Citus (which runs no triggers on distributed tables) the writer calls
-- pgrag.write_bm25_sums, a no-op while the triggers exist.

-- No key and no identity: rows are only summed and folded, and each appended row costs one
-- index entry and no sequence call.
CREATE TABLE pgrag.bm25_collection_sums (
    collection_id bigint NOT NULL,  -- no foreign key: a collection's deletion cascades here
    chunks        bigint NOT NULL,
    total_length  bigint NOT NULL   -- sum of length(tsv): the mean length is total / chunks
);
CREATE INDEX bm25_collection_sums_collection_idx ON pgrag.bm25_collection_sums (collection_id);

CREATE TABLE pgrag.bm25_term_sums (
    collection_id bigint NOT NULL,
    lexeme        text NOT NULL,
    df            bigint NOT NULL  -- chunks holding the lexeme
);
CREATE INDEX bm25_term_sums_lexeme_idx ON pgrag.bm25_term_sums (collection_id, lexeme);

-- Add (sign 1) or subtract (-1) the statistics of the chunks a statement wrote. One
-- function per transition table: a statement-level trigger sees only its own.
CREATE FUNCTION pgrag.bm25_sums_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgrag.bm25_collection_sums (collection_id, chunks, total_length)
    SELECT r.collection_id, count(*), sum(length(r.tsv)) FROM added r GROUP BY 1;
    INSERT INTO pgrag.bm25_term_sums (collection_id, lexeme, df)
    SELECT r.collection_id, l.lexeme, count(*)
    FROM added r, unnest(tsvector_to_array(r.tsv)) AS l(lexeme)
    GROUP BY 1, 2;
    RETURN NULL;
END
$$;

CREATE FUNCTION pgrag.bm25_sums_removed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgrag.bm25_collection_sums (collection_id, chunks, total_length)
    SELECT r.collection_id, -count(*), -sum(length(r.tsv)) FROM removed r GROUP BY 1;
    INSERT INTO pgrag.bm25_term_sums (collection_id, lexeme, df)
    SELECT r.collection_id, l.lexeme, -count(*)
    FROM removed r, unnest(tsvector_to_array(r.tsv)) AS l(lexeme)
    GROUP BY 1, 2;
    RETURN NULL;
END
$$;

-- An update (a heading or content rewritten in place): the net change of the rows whose
-- text or collection changed, old rows out and new rows in; nothing for the others (an
-- update of their language alone).
CREATE FUNCTION pgrag.bm25_sums_updated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    WITH changed AS MATERIALIZED (
        SELECT n.collection_id, n.tsv, o.collection_id AS old_collection_id, o.tsv AS old_tsv
        FROM added n JOIN removed o ON o.id = n.id
        WHERE n.tsv IS DISTINCT FROM o.tsv OR n.collection_id <> o.collection_id
    ),
    signed AS MATERIALIZED (
        SELECT c.collection_id, c.tsv, 1 AS sign FROM changed c
        UNION ALL
        SELECT c.old_collection_id, c.old_tsv, -1 FROM changed c
    ),
    chunk_sums AS (
        INSERT INTO pgrag.bm25_collection_sums (collection_id, chunks, total_length)
        SELECT s.collection_id, sum(s.sign), sum(s.sign * length(s.tsv))
        FROM signed s GROUP BY 1
        RETURNING 1
    )
    INSERT INTO pgrag.bm25_term_sums (collection_id, lexeme, df)
    SELECT s.collection_id, l.lexeme, sum(s.sign)
    FROM signed s, unnest(tsvector_to_array(s.tsv)) AS l(lexeme)
    GROUP BY 1, 2 HAVING sum(s.sign) <> 0;
    RETURN NULL;
END
$$;

-- The triggers on a single server (and on a Citus coordinator not yet distributed: they are
-- dropped when it distributes, pgrag.db.distributed). A cluster already distributed gets
-- the two tables distributed beside the chunks instead; its writer keeps them.
DO $$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                   WHERE logicalrelid = 'pgrag.chunks'::regclass) THEN
            PERFORM create_distributed_table(t::regclass, 'collection_id',
                                             colocate_with => 'pgrag.documents')
            FROM unnest(ARRAY['pgrag.bm25_collection_sums', 'pgrag.bm25_term_sums']) t;
            RETURN;
        END IF;
    END IF;
    EXECUTE $t$CREATE TRIGGER chunks_bm25_added AFTER INSERT ON pgrag.chunks
        REFERENCING NEW TABLE AS added FOR EACH STATEMENT
        EXECUTE FUNCTION pgrag.bm25_sums_added()$t$;
    EXECUTE $t$CREATE TRIGGER chunks_bm25_removed AFTER DELETE ON pgrag.chunks
        REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
        EXECUTE FUNCTION pgrag.bm25_sums_removed()$t$;
    EXECUTE $t$CREATE TRIGGER chunks_bm25_updated AFTER UPDATE ON pgrag.chunks
        REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT
        EXECUTE FUNCTION pgrag.bm25_sums_updated()$t$;
END
$$;

-- Existing chunks.
INSERT INTO pgrag.bm25_collection_sums (collection_id, chunks, total_length)
SELECT c.collection_id, count(*), sum(length(c.tsv)) FROM pgrag.chunks c GROUP BY 1;
INSERT INTO pgrag.bm25_term_sums (collection_id, lexeme, df)
SELECT c.collection_id, l.lexeme, count(*)
FROM pgrag.chunks c, unnest(tsvector_to_array(c.tsv)) AS l(lexeme)
GROUP BY 1, 2;

ALTER TABLE pgrag.bm25_collection_sums ENABLE ROW LEVEL SECURITY;
CREATE POLICY scoped ON pgrag.bm25_collection_sums FOR SELECT TO PUBLIC
    USING (pgrag.collection_in_scope(collection_id));
ALTER TABLE pgrag.bm25_term_sums ENABLE ROW LEVEL SECURITY;
CREATE POLICY scoped ON pgrag.bm25_term_sums FOR SELECT TO PUBLIC
    USING (pgrag.collection_in_scope(collection_id));
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pgrag_scoped') THEN
        GRANT SELECT ON pgrag.bm25_collection_sums, pgrag.bm25_term_sums TO pgrag_scoped;
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'pgrag: cannot grant to pgrag_scoped';
END
$$;
