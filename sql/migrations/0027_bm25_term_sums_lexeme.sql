-- A search over every collection reads each query term's document frequency summed over
-- the collections (pgrag.bm25_term_df with no collection): by lexeme alone, which the
-- (collection_id, lexeme) index does not serve.
CREATE INDEX bm25_term_sums_by_lexeme_idx ON pgrag.bm25_term_sums (lexeme);
