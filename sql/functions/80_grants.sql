-- Who may do what: the application role and the scoped role, granted by the schema's owner.
--
-- The owner (or a DBA) runs `pgrag migrate --app-role ROLE` (pgrag/db/roles.py): the
-- migrations run as the owner, then these functions grant ROLE what `ingest`, `serve`,
-- `search` and `reindex` need, and pgrag_scoped what collection-limited keys read. Every
-- `migrate` re-applies both (to every role granted before, pgrag.app_roles), so a new table
-- of a later migration, or a grant revoked by hand, is repaired by the next run. The DDL the
-- app role's work implies (an embedding set's HNSW index) runs in SECURITY DEFINER
-- functions the owner owns (30_semantic.sql), never as the app role.
--
-- To extend (e.g. a source the app role reads), add the grant to pgrag.grant_app_role.

-- The tables collection-limited requests read (row-level security filters them,
-- migrations 0011 and 0019): SELECT only.
CREATE OR REPLACE FUNCTION pgrag.scoped_tables() RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT ARRAY['collections', 'embedding_sets', 'documents', 'units', 'sheet_rows', 'chunks',
                 'embeddings', 'server_secret', 'language_sums', 'bm25_collection_sums',
                 'bm25_term_sums']
$$;

-- pgrag_scoped's privileges (the role itself is created by pgrag/db/roles.py where the
-- migrating role may create roles). Returns false when the role does not exist. SECURITY
-- DEFINER: a DBA with CREATEROLE who does not own the schema creates the role after the
-- first migration and grants it its tables through this function (only these SELECTs,
-- only to pgrag_scoped, whose membership only CREATEROLE can hand out).
CREATE OR REPLACE FUNCTION pgrag.grant_scoped_role() RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pgrag_scoped') THEN
        RETURN false;
    END IF;
    GRANT USAGE ON SCHEMA pgrag TO pgrag_scoped;
    FOREACH t IN ARRAY pgrag.scoped_tables() LOOP
        IF to_regclass(format('pgrag.%I', t)) IS NOT NULL THEN
            EXECUTE format('GRANT SELECT ON pgrag.%I TO pgrag_scoped', t);
        END IF;
    END LOOP;
    RETURN true;
END
$$;

-- Exactly what the application role needs: the schema, reading and writing pgrag's rows
-- (documents, chunks, vectors, logs, sessions), its sequences, its functions. Not: creating
-- objects in the schema, altering or dropping its tables, the migration records (read only,
-- for the schema version check), nor anything on the database itself.
CREATE OR REPLACE FUNCTION pgrag.grant_app_role(app_role name) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA pgrag TO %I', app_role);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA pgrag TO %I',
                   app_role);
    EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON pgrag.schema_migrations, '
                   'pgrag.schema_functions, pgrag.app_roles FROM %I', app_role);
    EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA pgrag TO %I', app_role);
    EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA pgrag TO %I', app_role);
    INSERT INTO pgrag.app_roles (role_name) VALUES (app_role) ON CONFLICT DO NOTHING;
END
$$;

-- The roles granted before (pgrag.app_roles, migration 0031) that still exist.
CREATE OR REPLACE FUNCTION pgrag.granted_app_roles() RETURNS SETOF name
LANGUAGE sql STABLE AS $$
    SELECT a.role_name FROM pgrag.app_roles a
    WHERE EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = a.role_name)
    ORDER BY a.role_name
$$;

-- Dropping an embedding set's HNSW index (reindex --drop-old, a set rebuilt with other
-- dimensions) as its owner, for an app role that does not own pgrag.embeddings. Plain DROP
-- INDEX (CONCURRENTLY cannot run in a function): it holds the table's lock for as long as a
-- catalog change takes. Only pgrag's per-set indexes, by set id.
CREATE OR REPLACE FUNCTION pgrag.drop_embedding_index(p_set_id bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE format('DROP INDEX IF EXISTS pgrag.%I', format('embeddings_hnsw_%s', p_set_id));
END
$$;

-- Whether a role already has all of grant_app_role's privileges (every start of the owner
-- re-checks; grants only what is missing, so concurrent starts do not rewrite the catalog).
CREATE OR REPLACE FUNCTION pgrag.app_role_granted(app_role name) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT has_schema_privilege(app_role, 'pgrag', 'USAGE')
       AND coalesce(bool_and(CASE WHEN c.relkind = 'S'
                                  THEN has_sequence_privilege(app_role, c.oid, 'USAGE')
                                  WHEN c.relname IN ('schema_migrations', 'schema_functions',
                                                     'app_roles')
                                  THEN has_table_privilege(app_role, c.oid, 'SELECT')
                                  ELSE has_table_privilege(app_role, c.oid,
                                                           'SELECT, INSERT, UPDATE, DELETE')
                                  END), true)
    FROM pg_class c
    WHERE c.relnamespace = 'pgrag'::regnamespace AND c.relkind IN ('r', 'p', 'S')
$$;

CREATE OR REPLACE FUNCTION pgrag.scoped_role_granted() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pgrag_scoped')
       AND has_schema_privilege('pgrag_scoped', 'pgrag', 'USAGE')
       AND (SELECT bool_and(to_regclass(format('pgrag.%I', t)) IS NULL
                            OR has_table_privilege('pgrag_scoped', format('pgrag.%I', t), 'SELECT'))
            FROM unnest(pgrag.scoped_tables()) t)
$$;
