-- Operations: log retention.

-- Retention for the two operator logs, which grow with every call (a search_log row keeps
-- its query vector, ~3 KB). `pgrag serve` calls this hourly with PGRAG_LOG_RETENTION_DAYS;
-- from psql:  SELECT * FROM pgrag.prune_logs('30 days');  (repeat until both counts are 0)
-- Each call deletes at most `batch` rows per table, oldest first, so no call holds locks
-- or bloats WAL for long.
CREATE OR REPLACE FUNCTION pgrag.prune_logs(keep interval, batch integer DEFAULT 10000)
RETURNS TABLE (search_log_rows bigint, audit_log_rows bigint)
LANGUAGE sql AS $$
    WITH s AS (
        DELETE FROM pgrag.search_log WHERE id IN (
            SELECT id FROM pgrag.search_log WHERE created_at < now() - keep
            ORDER BY created_at LIMIT batch)
        RETURNING 1
    ), a AS (
        DELETE FROM pgrag.audit_log WHERE id IN (
            SELECT id FROM pgrag.audit_log WHERE created_at < now() - keep
            ORDER BY created_at LIMIT batch)
        RETURNING 1
    )
    SELECT (SELECT count(*) FROM s), (SELECT count(*) FROM a)
$$;
