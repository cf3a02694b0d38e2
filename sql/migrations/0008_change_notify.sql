-- Tell every listening pgrag server when documents were added, changed or removed, whichever
-- process did it (a CLI `pgrag ingest`, a watcher, an upload): servers LISTEN on this channel
-- and relay `notifications/resources/list_changed` to their MCP sessions.
CREATE FUNCTION pgrag.notify_documents_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pgrag_documents', TG_OP);
    RETURN NULL;
END
$$;

CREATE TRIGGER documents_changed
AFTER INSERT OR DELETE OR UPDATE OF content_hash, status, path ON pgrag.documents
FOR EACH STATEMENT EXECUTE FUNCTION pgrag.notify_documents_changed();
