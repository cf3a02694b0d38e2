-- Filters and scopes shared by every search function.
--
-- Repeatable: the migration runner re-applies every file of sql/functions/ (in name order,
-- in one transaction, under the migration lock) whenever one of them changes, after
-- dropping the functions they define; each function is defined once, here. Tables,
-- indexes, row-level security and the functions generated columns and policies depend on
-- (pgrag.lexical_text, pgrag.chunk_tsv, pgrag.collection_in_scope, ...) are in
-- sql/migrations/.

-- Filtered searches need the filter per candidate: as an inlinable expression (no
-- sub-selects) it costs about a microsecond instead of a SQL-function
-- call, and with literal filters the planner can use documents_folder_idx.
-- On the document's columns rather than its row: Citus runs the filter on the shards, where
-- a row of pgrag.documents is a row of another type (documents_<shard>) and a function
-- taking the row type is not even created on the workers.
CREATE OR REPLACE FUNCTION pgrag.document_fields_match(
    folder text, file_type text, id uuid, modified_at timestamptz, created_at timestamptz,
    submitter text, author text, tags text[], filters jsonb, metadata jsonb DEFAULT NULL
) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT (filters ->> 'folder' IS NULL
            OR folder = filters ->> 'folder'
            OR folder LIKE replace(replace(replace(filters ->> 'folder', '\', '\\'), '%', '\%'), '_', '\_') || '/%')
       AND (filters -> 'file_type' IS NULL
            OR CASE jsonb_typeof(filters -> 'file_type')
                    WHEN 'array' THEN filters -> 'file_type' ? file_type
                    ELSE filters ->> 'file_type' = file_type END)
       AND (filters -> 'document_ids' IS NULL OR filters -> 'document_ids' ? id::text)
       AND (filters ->> 'date_from' IS NULL
            OR coalesce(modified_at, created_at) >= (filters ->> 'date_from')::timestamptz)
       AND (filters ->> 'date_to' IS NULL
            OR coalesce(modified_at, created_at) <= (filters ->> 'date_to')::timestamptz)
       AND (filters ->> 'submitter' IS NULL OR submitter = filters ->> 'submitter')
       AND (filters ->> 'author' IS NULL OR author = filters ->> 'author')
       AND (filters -> 'tags' IS NULL OR filters -> 'tags' ?| tags)
       AND (filters -> 'metadata' IS NULL OR metadata @> (filters -> 'metadata'))
$$;

-- The same on a row of pgrag.documents (single server; inlined like the above).
CREATE OR REPLACE FUNCTION pgrag.document_matches(d pgrag.documents, filters jsonb)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT pgrag.document_fields_match(
        folder => d.folder, file_type => d.file_type, id => d.id, modified_at => d.modified_at,
        created_at => d.created_at, submitter => d.submitter, author => d.author, tags => d.tags,
        filters => filters, metadata => d.metadata)
$$;

-- Enter a collection scope for the rest of the transaction (pgrag.db.scope), the only way
-- into one: the role pgrag_scoped, under which row-level security applies, and the scope
-- as the collection ids in pgrag.scope_ids that every policy compares with (migration
-- 0019: a policy reads no table, so on a Citus cluster it runs on the shards), and as
-- names in pgrag.scope (read by no policy: what the caller asked for, for SHOW; a bare SET
-- pgrag.scope shows nothing). Both are SET LOCAL statements, which Citus passes to the
-- workers taking part in the transaction when citus.propagate_set_commands is 'local'
-- (set_config() calls are not passed on); on a single server that setting is an unused
-- placeholder. The role is not passed on: Citus connects to the workers as the current
-- role. Call it first in the transaction, outside a savepoint (Citus forgets a released
-- savepoint's SET LOCALs).
CREATE OR REPLACE FUNCTION pgrag.enter_scope(scope text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pgrag.set_local('pgrag.scope', coalesce(scope, ''));
    PERFORM pgrag.set_local('pgrag.scope_ids', coalesce(
        (SELECT string_agg(c.id::text, '|' ORDER BY c.id) FROM pgrag.collections c
         WHERE c.name = ANY (string_to_array(nullif(scope, ''), '|'))), ''));
    PERFORM set_config('role', 'pgrag_scoped', true);
END
$$;

-- set_config(name, value, true) that also reaches the workers of a Citus cluster: a SET
-- LOCAL statement with citus.propagate_set_commands = 'local' (see above). Volatile, so
-- that stable functions (pgrag.semantic_candidates) can call it: they may not run SET.
CREATE OR REPLACE FUNCTION pgrag.set_local(name text, value text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF name !~ '^[a-z_]+(\.[a-z_]+)?$' THEN
        RAISE EXCEPTION 'pgrag.set_local: not a setting name: %', name;
    END IF;
    PERFORM set_config('citus.propagate_set_commands', 'local', true);
    EXECUTE format('SET LOCAL %s = %L', name, value);
END
$$;

-- Collections the caller may read: NULL (all) when row-level security does not apply to
-- it, else the ids RLS lets it see in pgrag.collections (none outside pgrag.enter_scope).
CREATE OR REPLACE FUNCTION pgrag.readable_collections() RETURNS bigint[]
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN row_security_active('pgrag.chunks'::regclass)
                THEN ARRAY(SELECT c.id FROM pgrag.collections c) END
$$;
