-- Collection scopes enforced by PostgreSQL itself (SPEC §7): a request made with a key that
-- is limited to collections runs as the role `pgrag_scoped` with the setting `pgrag.scope`
-- = 'coll1|coll2' (both SET LOCAL, inside the request's transaction). Row-level security
-- then hides every row of other collections, so a query that forgets a WHERE clause still
-- cannot read them. Unscoped work (CLI, stdio, keys without scope) runs as the login role,
-- which owns the tables and is not subject to these policies.

-- Is a collection in the current scope? No scope set means no collection (fail closed).
CREATE FUNCTION pgrag.collection_in_scope(cid bigint) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT EXISTS (
        SELECT 1 FROM pgrag.collections c
        WHERE c.id = cid
          AND c.name = ANY (string_to_array(nullif(current_setting('pgrag.scope', true), ''), '|'))
    )
$$;

ALTER TABLE pgrag.collections ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgrag.embedding_sets ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgrag.documents ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgrag.units ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgrag.sheet_rows ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgrag.chunks ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgrag.embeddings ENABLE ROW LEVEL SECURITY;

-- collections: the scope function reads pgrag.collections itself, so this policy compares
-- names directly (a policy calling collection_in_scope here would recurse)
CREATE POLICY scoped ON pgrag.collections FOR SELECT TO PUBLIC
    USING (name = ANY (string_to_array(nullif(current_setting('pgrag.scope', true), ''), '|')));
CREATE POLICY scoped ON pgrag.embedding_sets FOR SELECT TO PUBLIC
    USING (pgrag.collection_in_scope(collection_id));
CREATE POLICY scoped ON pgrag.documents FOR SELECT TO PUBLIC
    USING (pgrag.collection_in_scope(collection_id));
CREATE POLICY scoped ON pgrag.chunks FOR SELECT TO PUBLIC
    USING (pgrag.collection_in_scope(collection_id));
CREATE POLICY scoped ON pgrag.units FOR SELECT TO PUBLIC
    USING (EXISTS (SELECT 1 FROM pgrag.documents d WHERE d.id = document_id));
CREATE POLICY scoped ON pgrag.sheet_rows FOR SELECT TO PUBLIC
    USING (EXISTS (SELECT 1 FROM pgrag.units u WHERE u.id = unit_id));
CREATE POLICY scoped ON pgrag.embeddings FOR SELECT TO PUBLIC
    USING (EXISTS (SELECT 1 FROM pgrag.embedding_sets es WHERE es.id = set_id));

-- The role scoped requests switch to. Creating it needs CREATEROLE; without that privilege
-- the migration still succeeds and scoped keys are refused at start-up with the fix.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pgrag_scoped') THEN
        CREATE ROLE pgrag_scoped NOLOGIN NOBYPASSRLS;
    END IF;
    EXECUTE format('GRANT pgrag_scoped TO %I', current_user);
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'pgrag: cannot create role pgrag_scoped (needs CREATEROLE); collection-scoped API keys will be refused';
END
$$;

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pgrag_scoped') THEN
        GRANT USAGE ON SCHEMA pgrag TO pgrag_scoped;
        GRANT SELECT ON pgrag.collections, pgrag.embedding_sets, pgrag.documents, pgrag.units,
                        pgrag.sheet_rows, pgrag.chunks, pgrag.embeddings, pgrag.server_secret
              TO pgrag_scoped;
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'pgrag: cannot grant to pgrag_scoped';
END
$$;
