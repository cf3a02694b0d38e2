-- A chunk taken out of search by hand (issue #42, "chunk actions"): disabled_at set, the
-- chunk stays (its document, text, vector and BM25 sums are untouched, so enabling it
-- again restores it exactly) but no search mode returns it (sql/functions/15_routing.sql,
-- 30_semantic.sql, 45_regex.sql). NULL, the default, is enabled: adding the column rewrites
-- nothing. The partial index holds only the disabled chunks: the semantic leg reads a
-- collection's few disabled ids from it once per search (30_semantic.sql).
ALTER TABLE pgrag.chunks ADD COLUMN disabled_at timestamptz;
CREATE INDEX chunks_disabled_idx ON pgrag.chunks (collection_id) WHERE disabled_at IS NOT NULL;
