-- Table sources under an application role (`pgrag migrate --app-role`): the policies of
-- 0028 let such a role read and write every row of pgrag's other tables, but 0030 gave
-- table_sources and source_queue only their `scoped` SELECT policy, so the app role could
-- not add a source (its INSERT refused) and its drain would claim and delete no queue
-- entry (rows a policy hides are neither updated nor deleted). The owner and the
-- triggers' SECURITY DEFINER functions bypass row-level security and were not affected.
CREATE POLICY unscoped ON pgrag.table_sources FOR ALL TO PUBLIC
    USING (current_user <> 'pgrag_scoped') WITH CHECK (current_user <> 'pgrag_scoped');
CREATE POLICY unscoped ON pgrag.source_queue FOR ALL TO PUBLIC
    USING (current_user <> 'pgrag_scoped') WITH CHECK (current_user <> 'pgrag_scoped');
