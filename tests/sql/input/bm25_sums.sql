-- BM25's per-collection sums (migration 0023, sql/functions/25_bm25_sums.sql): what the
-- triggers append per statement, what the lexical leg reads from them, and the fold.
\i setup/ten_chunks.sql
-- The collection's chunks and total length (distinct lexemes), against a count.
SELECT t.chunks, t.total_length,
       (SELECT count(*) FROM pgrag.chunks) AS counted_chunks,
       (SELECT sum(length(tsv)) FROM pgrag.chunks) AS counted_length
FROM pgrag.bm25_collection_totals(ARRAY(SELECT id FROM pgrag.collections)) t;
-- Each query lexeme's document frequency in the collection (absent ones: no row).
SELECT d.lexeme, d.df
FROM pgrag.bm25_term_df(ARRAY(SELECT id FROM pgrag.collections),
                        ARRAY['tea', 'water', 'boil', 'zebra']) d
ORDER BY d.lexeme;
-- Every collection (NULL): the same sums, summed over the collections; none: nothing.
SELECT d.df FROM pgrag.bm25_term_df(NULL, ARRAY['tea']) d;
SELECT count(*) FROM pgrag.bm25_term_df('{}', ARRAY['tea']);
-- A delete and an in-place rewrite append signed rows; the stored sums still equal a count.
DELETE FROM pgrag.chunks WHERE ordinal = 2;
UPDATE pgrag.chunks SET content = 'Mint tea and more tea.' WHERE ordinal = 8;
UPDATE pgrag.chunks SET lang = 'en';
SELECT count(*) AS term_rows FROM pgrag.bm25_term_sums;
SELECT d.lexeme, d.df,
       (SELECT count(*) FROM pgrag.chunks c
        WHERE c.tsv @@ to_tsquery('pgrag.search', d.lexeme)) AS counted
FROM pgrag.bm25_term_df(ARRAY(SELECT id FROM pgrag.collections),
                        ARRAY['tea', 'mint', 'fresh', 'milk']) d
ORDER BY d.lexeme;
-- The fold leaves one row per lexeme, with the same sums.
SELECT pgrag.compact_bm25_sums() > 0 AS folded;
SELECT count(*) = count(DISTINCT lexeme) AS one_row_each,
       (SELECT sum(chunks) FROM pgrag.bm25_collection_sums) AS chunks
FROM pgrag.bm25_term_sums;
SELECT d.lexeme, d.df
FROM pgrag.bm25_term_df(ARRAY(SELECT id FROM pgrag.collections),
                        ARRAY['tea', 'mint', 'fresh', 'milk']) d
ORDER BY d.lexeme;
-- The collection-filtered lexical pool reads them: the same pool as the unscoped search
-- of the one collection.
SELECT (SELECT array_agg(chunk_id ORDER BY rank) FROM pgrag.lexical_candidates(
            'boiling water for tea', collection_ids => ARRAY(SELECT id FROM pgrag.collections)))
     = (SELECT array_agg(chunk_id ORDER BY rank) FROM pgrag.lexical_candidates(
            'boiling water for tea')) AS same_pool;
