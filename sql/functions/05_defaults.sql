-- The ranking defaults, in one place: a NULL (or omitted) argument of the search functions
-- (20_lexical.sql, 40_hybrid.sql) means the value here, and the server reads them to show
-- and log what it ranked with (pgrag.explain_search replays a logged search with them).
-- Each column is also the name of the hybrid functions' argument it defaults, and of a
-- field of pgrag/search/options.py, which sends every one by name.
--   SELECT * FROM pgrag.fusion_defaults();
-- coverage_gain and max_lexical_share were chosen on SciFact train (40_hybrid.sql),
-- proximity_weight and proximity_width (20_lexical.sql) on SciFact train and the office
-- documents of benchmarks/docbench (benchmarks/README.md, "Proximity"). BM25's k1 = 0.9 and
-- b = 0.4 are bm25s' defaults (their SciFact figures against ts_rank_cd: benchmarks/README.md);
-- candidate_budget (postings of common terms read per query) and rescore_size (chunks
-- whose full BM25 is computed) bound the lexical leg's work (20_lexical.sql).
CREATE OR REPLACE FUNCTION pgrag.fusion_defaults() RETURNS TABLE (
    fusion              text,
    rrf_k               int,
    lexical_weight      float8,
    semantic_weight     float8,
    pool_size           int,
    coverage_gain       float8,
    max_lexical_share   float8,
    proximity_weight    float8,
    proximity_width     int,
    chunks_per_document int,
    bm25_k1             float8,
    bm25_b              float8,
    candidate_budget    float8,
    rescore_size        int
)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 'adaptive'::text, 60, 1.0::float8, 1.0::float8, 100, 1.2::float8, 0.8::float8,
           0.4::float8, 10, 3, 0.9::float8, 0.4::float8, 1000::float8, 150
$$;
