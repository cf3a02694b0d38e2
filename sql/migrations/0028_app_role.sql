-- The application role (`pgrag migrate --app-role ROLE`, sql/functions/80_grants.sql) reads
-- and writes every row, as the owner does: row-level security is for collection-limited
-- requests only (0011). The owner bypasses it; any other role the owner granted these tables
-- is let through by this policy, except pgrag_scoped, which keeps only its `scoped` policies.
-- A role without table privileges still reads nothing: privileges are checked first.
CREATE POLICY unscoped ON pgrag.collections FOR ALL TO PUBLIC
    USING (current_user <> 'pgrag_scoped') WITH CHECK (current_user <> 'pgrag_scoped');
CREATE POLICY unscoped ON pgrag.embedding_sets FOR ALL TO PUBLIC
    USING (current_user <> 'pgrag_scoped') WITH CHECK (current_user <> 'pgrag_scoped');
CREATE POLICY unscoped ON pgrag.documents FOR ALL TO PUBLIC
    USING (current_user <> 'pgrag_scoped') WITH CHECK (current_user <> 'pgrag_scoped');
CREATE POLICY unscoped ON pgrag.units FOR ALL TO PUBLIC
    USING (current_user <> 'pgrag_scoped') WITH CHECK (current_user <> 'pgrag_scoped');
CREATE POLICY unscoped ON pgrag.sheet_rows FOR ALL TO PUBLIC
    USING (current_user <> 'pgrag_scoped') WITH CHECK (current_user <> 'pgrag_scoped');
CREATE POLICY unscoped ON pgrag.chunks FOR ALL TO PUBLIC
    USING (current_user <> 'pgrag_scoped') WITH CHECK (current_user <> 'pgrag_scoped');
CREATE POLICY unscoped ON pgrag.embeddings FOR ALL TO PUBLIC
    USING (current_user <> 'pgrag_scoped') WITH CHECK (current_user <> 'pgrag_scoped');
CREATE POLICY unscoped ON pgrag.language_sums FOR ALL TO PUBLIC
    USING (current_user <> 'pgrag_scoped') WITH CHECK (current_user <> 'pgrag_scoped');
CREATE POLICY unscoped ON pgrag.bm25_collection_sums FOR ALL TO PUBLIC
    USING (current_user <> 'pgrag_scoped') WITH CHECK (current_user <> 'pgrag_scoped');
CREATE POLICY unscoped ON pgrag.bm25_term_sums FOR ALL TO PUBLIC
    USING (current_user <> 'pgrag_scoped') WITH CHECK (current_user <> 'pgrag_scoped');
