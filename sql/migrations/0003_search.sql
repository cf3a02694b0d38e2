-- Search, part 2: the trigram index of regex mode, the search log and the secret that signs
-- continuation tokens.

-- Regex mode and fuzzy matching read chunk text through trigrams (pg_trgm handles POSIX
-- regular expressions with a GIN index).
CREATE INDEX chunks_content_trgm_idx ON pgrag.chunks USING gin (content gin_trgm_ops);

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

-- A per-database secret that signs continuation tokens, shared by every server process.
CREATE TABLE pgrag.server_secret (
    id      boolean PRIMARY KEY DEFAULT true CHECK (id),
    secret  text NOT NULL DEFAULT (md5(random()::text || clock_timestamp()::text)
                                    || md5(gen_random_uuid()::text))
);
INSERT INTO pgrag.server_secret DEFAULT VALUES;
