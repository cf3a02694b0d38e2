-- The ranking options as one value: every search function (sql/functions/20_lexical.sql,
-- 40_hybrid.sql, 50_explain.sql) takes one argument of this type, `opts`, in place of the
-- fourteen it took before. Its defaults are pgrag.ranking_defaults() and one option is
-- changed by name with pgrag.ranking_options(bm25_k1 => 1.2) (sql/functions/05_defaults.sql);
-- the server sends it built the same way (pgrag/search/options.py). A field added later is
-- an ALTER TYPE ... ADD ATTRIBUTE in a new migration.
CREATE TYPE pgrag.ranking_options AS (
    fusion              text,    -- 'adaptive' or 'rrf' (40_hybrid.sql)
    rrf_k               int,
    lexical_weight      float8,  -- 0 switches the BM25 leg off
    semantic_weight     float8,  -- 0 switches the cosine leg off
    pool_size           int,     -- candidates per leg
    coverage_gain       float8,
    max_lexical_share   float8,
    proximity_weight    float8,
    proximity_width     int,     -- positions per window (20_lexical.sql); 0: none
    chunks_per_document int,     -- scope => 'documents' only
    bm25_k1             float8,
    bm25_b              float8,
    candidate_budget    float8,  -- postings of common terms read per query
    rescore_size        int      -- chunks whose full BM25 is computed
);
