-- Chunk actions: a chunk disabled by hand (migration 0032) stays stored but no search mode
-- returns it (the lexical leg's reads in 15_routing.sql, the semantic leg in 30_semantic.sql,
-- regex in 45_regex.sql); enabled again, it ranks exactly as before. The state lives on the
-- chunk row, and re-ingesting an unchanged file keeps its chunks, so it survives that too
-- (a changed file's new version has new chunks, all enabled).
--
-- Invoker's rights: only a role that may UPDATE pgrag.chunks changes a chunk (the scoped
-- role of collection-limited keys reads only; the server checks such a key's collection and
-- writes for it). From psql:
--   SELECT * FROM pgrag.disable_chunk(42);   SELECT * FROM pgrag.enable_chunk(42);
--   SELECT id, document_id, disabled_at FROM pgrag.chunks WHERE disabled_at IS NOT NULL;
-- No row: no such chunk (or none the caller may see).

-- Set or clear a chunk's disabled_at (an already disabled chunk keeps its first date).
-- p_collection_id, when given, names the chunk's collection (on Citus, its one shard; each
-- statement then routed there). The date is computed here, not in the UPDATE: Citus takes
-- no now() inside a CASE of a distributed statement.
CREATE OR REPLACE FUNCTION pgrag.set_chunk_disabled(
    p_chunk_id bigint, p_disabled boolean, p_collection_id bigint DEFAULT NULL
) RETURNS TABLE (chunk_id bigint, document_id uuid, collection_id bigint, disabled_at timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    stamp timestamptz := CASE WHEN p_disabled THEN now() END;
BEGIN
    IF p_collection_id IS NULL THEN
        p_collection_id := (SELECT c.collection_id FROM pgrag.chunks c WHERE c.id = p_chunk_id);
    END IF;
    UPDATE pgrag.chunks c SET disabled_at = stamp
     WHERE c.collection_id = p_collection_id AND c.id = p_chunk_id
       AND (c.disabled_at IS NULL) = p_disabled;
    RETURN QUERY
        SELECT c.id, c.document_id, c.collection_id, c.disabled_at FROM pgrag.chunks c
        WHERE c.collection_id = p_collection_id AND c.id = p_chunk_id;
END
$$;

CREATE OR REPLACE FUNCTION pgrag.disable_chunk(id bigint)
RETURNS TABLE (chunk_id bigint, document_id uuid, collection_id bigint, disabled_at timestamptz)
LANGUAGE sql AS $$
    SELECT * FROM pgrag.set_chunk_disabled(disable_chunk.id, true)
$$;

CREATE OR REPLACE FUNCTION pgrag.enable_chunk(id bigint)
RETURNS TABLE (chunk_id bigint, document_id uuid, collection_id bigint, disabled_at timestamptz)
LANGUAGE sql AS $$
    SELECT * FROM pgrag.set_chunk_disabled(enable_chunk.id, false)
$$;
