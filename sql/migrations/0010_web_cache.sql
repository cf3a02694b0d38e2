-- `web_search` results (SearXNG, SPEC §5.3) cached by (query, language, recency). The TTL
-- (PGRAG_WEB_CACHE_TTL_S) is applied when reading, so it can change without a migration.
CREATE TABLE pgrag.web_cache (
    query         text NOT NULL,              -- normalised: trimmed, spaces collapsed, lower case
    language      text NOT NULL DEFAULT '',   -- '' = SearXNG's default
    recency_days  int NOT NULL DEFAULT 0,     -- 0 = any time
    items         jsonb NOT NULL,             -- normalised items, upstream order
    total         bigint,                     -- SearXNG's number_of_results, when it says
    fetched_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (query, language, recency_days)
);
CREATE INDEX web_cache_fetched_idx ON pgrag.web_cache (fetched_at);
