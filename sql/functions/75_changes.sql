-- Change notifications where the documents trigger (migration 0008) cannot fire.
--
-- On Citus `pgrag.documents` is a distributed table: its rows live in shards on the
-- workers, a change runs there, and the statement trigger is dropped at distribution (it
-- would fire on a worker, where no pgrag server LISTENs). So every writer of pgrag
-- (ingestion, deletes, the write toolset) calls this after each change of pgrag.documents,
-- inside the change's transaction: the NOTIFY is queued on the coordinator, where every
-- `pgrag serve` LISTENs, and is sent only if that transaction commits. Same channel and
-- payload as the trigger. A no-op while the trigger exists (a single server: the trigger
-- already notified, and also covers changes made by hand in psql).
CREATE OR REPLACE FUNCTION pgrag.announce_documents_changed(p_op text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = 'pgrag.documents'::regclass
               AND tgname = 'documents_changed') THEN
        RETURN;
    END IF;
    PERFORM pg_notify('pgrag_documents', p_op);
END
$$;
