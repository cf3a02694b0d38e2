-- The ranking defaults, in one place: pgrag.ranking_defaults() is the value of the `opts`
-- argument (type pgrag.ranking_options, migration 0033) that every search function takes
-- when the caller names none (20_lexical.sql, 40_hybrid.sql), and the server reads it to
-- show and log what it ranked with (pgrag.explain_search replays a logged search with the
-- options it logged). Each field is also a field of pgrag/search/options.py, which sends
-- them all by name.
--   SELECT * FROM pgrag.ranking_defaults();
--   SELECT * FROM pgrag.hybrid_search('tea', NULL, opts => pgrag.ranking_options(bm25_k1 => 1.2));
-- coverage_gain and max_lexical_share were chosen on SciFact train (40_hybrid.sql),
-- proximity_weight and proximity_width (20_lexical.sql) on SciFact train and the office
-- documents of benchmarks/docbench (benchmarks/README.md, "Proximity"). BM25's k1 = 0.9 and
-- b = 0.4 are bm25s' defaults (their SciFact figures against ts_rank_cd: benchmarks/README.md);
-- candidate_budget (postings of common terms read per query) and rescore_size (chunks
-- whose full BM25 is computed) bound the lexical leg's work (20_lexical.sql).
CREATE OR REPLACE FUNCTION pgrag.ranking_defaults() RETURNS pgrag.ranking_options
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ROW(
        'adaptive',  -- fusion
        60,          -- rrf_k
        1.0,         -- lexical_weight
        1.0,         -- semantic_weight
        100,         -- pool_size
        1.2,         -- coverage_gain
        0.8,         -- max_lexical_share
        0.4,         -- proximity_weight
        10,          -- proximity_width
        3,           -- chunks_per_document
        0.9,         -- bm25_k1
        0.4,         -- bm25_b
        1000,        -- candidate_budget
        150          -- rescore_size
    )::pgrag.ranking_options
$$;

-- The defaults with the options named changed, for psql:
--   pgrag.ranking_options(fusion => 'rrf', rrf_k => 10)
-- (a NULL or omitted option is its default).
CREATE OR REPLACE FUNCTION pgrag.ranking_options(
    fusion              text DEFAULT NULL,
    rrf_k               int DEFAULT NULL,
    lexical_weight      float8 DEFAULT NULL,
    semantic_weight     float8 DEFAULT NULL,
    pool_size           int DEFAULT NULL,
    coverage_gain       float8 DEFAULT NULL,
    max_lexical_share   float8 DEFAULT NULL,
    proximity_weight    float8 DEFAULT NULL,
    proximity_width     int DEFAULT NULL,
    chunks_per_document int DEFAULT NULL,
    bm25_k1             float8 DEFAULT NULL,
    bm25_b              float8 DEFAULT NULL,
    candidate_budget    float8 DEFAULT NULL,
    rescore_size        int DEFAULT NULL
) RETURNS pgrag.ranking_options
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ROW(coalesce(ranking_options.fusion, d.fusion),
               coalesce(ranking_options.rrf_k, d.rrf_k),
               coalesce(ranking_options.lexical_weight, d.lexical_weight),
               coalesce(ranking_options.semantic_weight, d.semantic_weight),
               coalesce(ranking_options.pool_size, d.pool_size),
               coalesce(ranking_options.coverage_gain, d.coverage_gain),
               coalesce(ranking_options.max_lexical_share, d.max_lexical_share),
               coalesce(ranking_options.proximity_weight, d.proximity_weight),
               coalesce(ranking_options.proximity_width, d.proximity_width),
               coalesce(ranking_options.chunks_per_document, d.chunks_per_document),
               coalesce(ranking_options.bm25_k1, d.bm25_k1),
               coalesce(ranking_options.bm25_b, d.bm25_b),
               coalesce(ranking_options.candidate_budget, d.candidate_budget),
               coalesce(ranking_options.rescore_size, d.rescore_size))::pgrag.ranking_options
    FROM pgrag.ranking_defaults() d
$$;

-- The defaults as a one-row table, as before the composite (psql, older scripts).
CREATE OR REPLACE FUNCTION pgrag.fusion_defaults() RETURNS SETOF pgrag.ranking_options
LANGUAGE sql IMMUTABLE PARALLEL SAFE ROWS 1 AS $$
    SELECT * FROM pgrag.ranking_defaults()
$$;
