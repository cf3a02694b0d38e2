-- Search, part 2: documents scope, regex mode, the search log and pgrag.explain_search.

-- Regex mode and fuzzy matching read chunk text through trigrams (pg_trgm handles POSIX
-- regular expressions with a GIN index).
CREATE INDEX chunks_content_trgm_idx ON pgrag.chunks USING gin (content gin_trgm_ops);

-- Documents ranked by their best chunk (hybrid fusion as in pgrag.hybrid_search), with the
-- ids of their best chunks in rank order.
CREATE FUNCTION pgrag.hybrid_search_documents(
    query_text          text,
    query_embedding     vector,
    match_count         int DEFAULT 10,
    collection_ids      bigint[] DEFAULT NULL,
    filters             jsonb DEFAULT '{}'::jsonb,
    rrf_k               int DEFAULT 60,
    lexical_weight      float8 DEFAULT 1.0,
    semantic_weight     float8 DEFAULT 1.0,
    pool_size           int DEFAULT 100,
    min_similarity      float8 DEFAULT NULL,
    embedding_model     text DEFAULT NULL,
    match_offset        int DEFAULT 0,
    chunks_per_document int DEFAULT 3
) RETURNS TABLE (
    rank            int,
    document_id     uuid,
    best_chunk_id   bigint,
    chunk_ids       bigint[],
    lexical_rank    int,
    lexical_score   float4,
    semantic_rank   int,
    semantic_score  float8,
    fused_score     float8,
    total_documents int
)
LANGUAGE sql STABLE AS $$
    WITH hits AS (
        SELECT h.*, row_number() OVER (PARTITION BY h.document_id ORDER BY h.rank) AS nth
        FROM pgrag.hybrid_search(query_text, query_embedding, pool_size * 2, collection_ids,
                                 filters, rrf_k, lexical_weight, semantic_weight, pool_size,
                                 min_similarity, embedding_model) h
    ),
    docs AS (
        SELECT b.document_id, b.chunk_id AS best, b.lexical_rank, b.lexical_score,
               b.semantic_rank, b.semantic_score, b.fused_score, b.rank AS best_rank,
               (SELECT array_agg(x.chunk_id ORDER BY x.rank) FROM hits x
                 WHERE x.document_id = b.document_id AND x.nth <= chunks_per_document) AS chunk_ids
        FROM hits b
        WHERE b.nth = 1
    )
    SELECT row_number() OVER (ORDER BY d.best_rank)::int, d.document_id, d.best, d.chunk_ids,
           d.lexical_rank, d.lexical_score, d.semantic_rank, d.semantic_score, d.fused_score,
           count(*) OVER ()::int
    FROM docs d
    ORDER BY d.best_rank
    LIMIT match_count OFFSET match_offset
$$;

-- Regex mode: POSIX regular expression over chunk text (case-insensitive unless asked).
-- Callers run it under a statement_timeout; an invalid pattern raises SQLSTATE 2201B.
-- Order: most matches first, then document path and position, so pages are stable.
CREATE FUNCTION pgrag.regex_search(
    pattern         text,
    match_count     int DEFAULT 10,
    collection_ids  bigint[] DEFAULT NULL,
    filters         jsonb DEFAULT '{}'::jsonb,
    match_offset    int DEFAULT 0,
    case_sensitive  boolean DEFAULT false
) RETURNS TABLE (rank int, chunk_id bigint, document_id uuid, matches int, total_candidates int)
LANGUAGE sql STABLE AS $$
    WITH hits AS (
        SELECT c.id, c.document_id, d.path, c.ordinal,
               (SELECT count(*) FROM regexp_matches(c.content, pattern,
                                                    CASE WHEN case_sensitive THEN 'g' ELSE 'gi' END))::int AS n
        FROM pgrag.chunks c
        JOIN pgrag.documents d ON d.id = c.document_id
        WHERE (CASE WHEN case_sensitive THEN c.content ~ pattern ELSE c.content ~* pattern END)
          AND (collection_ids IS NULL OR c.collection_id = ANY (collection_ids))
          AND pgrag.document_matches(d, filters)
    )
    SELECT row_number() OVER (ORDER BY h.n DESC, h.path, h.ordinal)::int, h.id, h.document_id,
           h.n, count(*) OVER ()::int
    FROM hits h
    ORDER BY h.n DESC, h.path, h.ordinal
    LIMIT match_count OFFSET match_offset
$$;

-- Every search, so that a ranking can be inspected and reproduced later.
CREATE TABLE pgrag.search_log (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at      timestamptz NOT NULL DEFAULT now(),
    query           text NOT NULL,
    mode            text NOT NULL,
    scope           text NOT NULL,
    params          jsonb NOT NULL,          -- the SQL function's arguments
    query_embedding vector,
    model           text,
    degraded        text[] NOT NULL DEFAULT '{}',
    results         jsonb NOT NULL,          -- [{rank, chunk_id, document_id, ...}]
    timings         jsonb NOT NULL DEFAULT '{}'::jsonb,
    caller          text
);
CREATE INDEX search_log_created_idx ON pgrag.search_log (created_at);

-- Re-run a logged hybrid/semantic/keyword search with its recorded arguments and show the
-- logged rank next to today's: a DBA's "why did this rank there?".
CREATE FUNCTION pgrag.explain_search(log_id bigint) RETURNS TABLE (
    rank            int,
    logged_rank     int,
    chunk_id        bigint,
    document_path   text,
    location        text,
    lexical_rank    int,
    lexical_score   float4,
    semantic_rank   int,
    semantic_score  float8,
    fused_score     float8,
    rrf_k           int,
    lexical_weight  float8,
    semantic_weight float8,
    snippet         text
)
LANGUAGE sql STABLE AS $$
    WITH l AS (SELECT * FROM pgrag.search_log WHERE id = log_id),
    p AS (
        SELECT l.*, (l.params ->> 'rrf_k')::int AS k,
               (l.params ->> 'lexical_weight')::float8 AS lw,
               (l.params ->> 'semantic_weight')::float8 AS sw
        FROM l
    ),
    logged AS (
        SELECT (r ->> 'chunk_id')::bigint AS chunk_id, (r ->> 'rank')::int AS rank
        FROM p, jsonb_array_elements(p.results) r
    )
    SELECT h.rank, g.rank, h.chunk_id, d.path,
           concat_ws(' ', 'page ' || c.page, 'section ' || c.section, 'sheet ' || c.sheet,
                     'rows ' || c.row_start || '-' || c.row_end, 'slide ' || c.slide),
           h.lexical_rank, h.lexical_score, h.semantic_rank, h.semantic_score, h.fused_score,
           p.k, p.lw, p.sw, left(c.content, 120)
    FROM p
    CROSS JOIN LATERAL pgrag.hybrid_search(
        p.query,
        CASE WHEN p.sw = 0 THEN NULL ELSE p.query_embedding END,
        (p.params ->> 'match_count')::int,
        (SELECT array_agg(x::bigint)
           FROM jsonb_array_elements_text(nullif(p.params -> 'collection_ids', 'null')) x),
        coalesce(p.params -> 'filters', '{}'::jsonb),
        p.k, p.lw, p.sw,
        (p.params ->> 'pool_size')::int,
        (p.params ->> 'min_similarity')::float8,
        p.params ->> 'embedding_model',
        coalesce((p.params ->> 'match_offset')::int, 0)) h
    JOIN pgrag.chunks c ON c.id = h.chunk_id
    JOIN pgrag.documents d ON d.id = c.document_id
    LEFT JOIN logged g ON g.chunk_id = h.chunk_id
    ORDER BY h.rank
$$;

-- A per-database secret that signs continuation tokens, shared by every server process.
CREATE TABLE pgrag.server_secret (
    id      boolean PRIMARY KEY DEFAULT true CHECK (id),
    secret  text NOT NULL DEFAULT (md5(random()::text || clock_timestamp()::text)
                                    || md5(gen_random_uuid()::text))
);
INSERT INTO pgrag.server_secret DEFAULT VALUES;
