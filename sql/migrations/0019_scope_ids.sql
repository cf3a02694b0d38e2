-- Collection scopes by collection id, on a single server and on a Citus cluster alike.
--
-- pgrag.enter_scope (sql/functions/10_filters.sql) resolves the scope's collection names
-- to their ids once, when a scoped transaction begins, and sets both `pgrag.scope` (the
-- names, for reading back) and `pgrag.scope_ids` (the ids) with SET LOCAL, which a Citus
-- coordinator passes on to its workers. The policies compare a row's collection with
-- those ids and read no table: on a cluster they run on the shards, where reading
-- pgrag.collections would be a distributed query inside a shard query (Citus refuses it).
--
-- Only pgrag.enter_scope sets `pgrag.scope_ids`: a bare `SET pgrag.scope = '...'` (names
-- only, the mechanism of migration 0011) now shows nothing at all (fail closed).

CREATE OR REPLACE FUNCTION pgrag.collection_in_scope(cid bigint) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT cid = ANY (string_to_array(
        nullif(current_setting('pgrag.scope_ids', true), ''), '|')::bigint[])
$$;

-- pgrag.collections itself by id too: the function no longer reads the table, so the
-- policy may call it (with names it had to compare them inline to avoid recursing)
ALTER POLICY scoped ON pgrag.collections USING (pgrag.collection_in_scope(id));
