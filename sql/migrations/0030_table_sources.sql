-- Table sources (issue 40): rows of the user's own tables, one document per row, kept in
-- sync by triggers that write the changed keys to a queue in the writer's transaction.
--
-- pgrag.table_sources is the registry (sql/functions/80_table_sources.sql adds and removes
-- sources); pgrag.source_queue holds the keys of rows changed since they were last indexed.
-- `pgrag serve` (or `pgrag source sync`) drains it: it reads each queued row as it is now,
-- writes its document and deletes the queue entries in one transaction, so a crash at any
-- point loses nothing and indexes nothing twice. Nothing is lost while pgrag is down: the
-- triggers run in the database.

ALTER TABLE pgrag.documents DROP CONSTRAINT documents_source_check;
ALTER TABLE pgrag.documents ADD CONSTRAINT documents_source_check
    CHECK (source IN ('file', 'saved', 'table'));
-- a row's document: its source and its key (the table's primary key as a JSON object)
ALTER TABLE pgrag.documents ADD COLUMN table_source_id bigint;
ALTER TABLE pgrag.documents ADD COLUMN source_key jsonb;
CREATE INDEX documents_table_source_idx ON pgrag.documents (table_source_id)
    WHERE table_source_id IS NOT NULL;

CREATE TABLE pgrag.table_sources (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200),
    relation            regclass NOT NULL,  -- follows a renamed table
    id_columns          text[] NOT NULL CHECK (cardinality(id_columns) > 0),
    text_columns        text[] NOT NULL CHECK (cardinality(text_columns) > 0),
    title_column        text,
    metadata_columns    text[] NOT NULL DEFAULT '{}',
    collection          text NOT NULL CHECK (length(collection) BETWEEN 1 AND 200),
    state               text NOT NULL DEFAULT 'backfilling'
                        CHECK (state IN ('backfilling', 'ready', 'failed', 'removed')),
    failure             text,               -- why the source is failed
    backfill_cursor     jsonb,              -- last key the backfill queued (NULL: none yet)
    backfill_done       bigint NOT NULL DEFAULT 0,
    backfill_total      bigint,             -- exact row count when the backfill began
    backfill_started_at timestamptz,
    synced_at           timestamptz,        -- when a drain last found nothing left to do
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now()
);

-- Append-only: a change queued while a drain holds older entries of the same row is a new
-- entry, never merged into one the drain is about to delete. No foreign key, so a bulk
-- write pays no per-row check; sources are removed with their entries.
CREATE TABLE pgrag.source_queue (
    id          bigint GENERATED ALWAYS AS IDENTITY,
    source_id   bigint NOT NULL,
    key         jsonb,                      -- NULL: the table was truncated
    queued_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX source_queue_idx ON pgrag.source_queue (source_id, id);

-- The one trigger function of every source (statement-level, AFTER INSERT, UPDATE, DELETE
-- and TRUNCATE, with transition tables): TG_ARGV[0] is the source id. It queues the keys
-- of the rows the statement changed; an UPDATE queues only rows whose indexed columns
-- (text, title, metadata) changed, and a key change as the old key (now gone) and the new
-- one. Identifiers come from the registry and are quoted with format('%I'); values never
-- enter the statement text. SECURITY DEFINER: the table's writers need no right on the
-- queue. On a logical-replication subscriber the same function fires per row (see
-- pgrag.add_table_source): the apply worker fires row triggers only.
CREATE FUNCTION pgrag.table_source_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    sid       bigint := TG_ARGV[0]::bigint;
    s         record;
    key_of    text;
    same_key  text;
    watched   text;
    queued    bigint := 0;
    changed   boolean;
BEGIN
    -- only the registered columns the table still has: a column dropped or renamed under
    -- a live source never fails the user's write (the drain marks the source failed)
    SELECT t.relation, t.state, cardinality(t.id_columns) AS id_count,
           ARRAY(SELECT c FROM unnest(t.id_columns) c WHERE EXISTS (
                   SELECT 1 FROM pg_attribute a WHERE a.attrelid = t.relation
                      AND a.attname = c AND a.attnum > 0 AND NOT a.attisdropped)) AS ids,
           ARRAY(SELECT c FROM unnest(t.text_columns || t.metadata_columns
                                      || coalesce(t.title_column, '')) c
                 WHERE EXISTS (
                   SELECT 1 FROM pg_attribute a WHERE a.attrelid = t.relation
                      AND a.attname = c AND a.attnum > 0 AND NOT a.attisdropped)) AS indexed
      INTO s FROM pgrag.table_sources t WHERE t.id = sid;
    IF NOT FOUND OR s.state = 'removed' OR s.relation <> TG_RELID::regclass THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'TRUNCATE' THEN
        INSERT INTO pgrag.source_queue (source_id, key) VALUES (sid, NULL);
        PERFORM pg_notify('pgrag_sources', sid::text);
        RETURN NULL;
    END IF;
    IF cardinality(s.ids) < s.id_count THEN
        RETURN NULL;  -- a key column is gone: the source must be added again
    END IF;
    SELECT 'jsonb_build_object(' || string_agg(format('%L, r.%I', c, c), ', ') || ')'
      INTO key_of FROM unnest(s.ids) c;
    -- compared as text: every type has a text form, and no operator of another schema is
    -- looked up (the search path is pg_catalog's)
    SELECT string_agg(format('o.%I::text IS DISTINCT FROM r.%I::text', c, c), ' OR ')
      INTO watched FROM unnest(s.indexed) c;
    SELECT string_agg(format('o.%I::text = r.%I::text', c, c), ' AND ')
      INTO same_key FROM unnest(s.ids) c;
    IF TG_LEVEL = 'ROW' THEN
        IF TG_OP = 'UPDATE' THEN
            EXECUTE format('SELECT NOT (%s) OR (%s) FROM (SELECT ($1).*) o, (SELECT ($2).*) r',
                           same_key, coalesce(watched, 'false'))
               INTO STRICT changed USING OLD, NEW;
            IF NOT changed THEN
                RETURN NULL;
            END IF;
            EXECUTE format('INSERT INTO pgrag.source_queue (source_id, key) '
                           'SELECT $1, %s FROM (SELECT ($2).*) r', key_of) USING sid, OLD;
        END IF;
        EXECUTE format('INSERT INTO pgrag.source_queue (source_id, key) '
                       'SELECT $1, %s FROM (SELECT ($2).*) r', key_of)
            USING sid, CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
        PERFORM pg_notify('pgrag_sources', sid::text);
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        EXECUTE format('INSERT INTO pgrag.source_queue (source_id, key) '
                       'SELECT $1, %s FROM new_rows r', key_of) USING sid;
    ELSIF TG_OP = 'DELETE' THEN
        EXECUTE format('INSERT INTO pgrag.source_queue (source_id, key) '
                       'SELECT $1, %s FROM old_rows r', key_of) USING sid;
    ELSE
        -- new or changed rows (a new key, or an indexed column changed), then keys gone
        EXECUTE format(
            'INSERT INTO pgrag.source_queue (source_id, key) '
            'SELECT $1, %1$s FROM new_rows r '
            ' WHERE NOT EXISTS (SELECT 1 FROM old_rows o WHERE %2$s AND NOT (%3$s)) '
            'UNION ALL '
            'SELECT $1, %1$s FROM old_rows r '
            ' WHERE NOT EXISTS (SELECT 1 FROM new_rows o WHERE %2$s)',
            key_of, same_key, coalesce(watched, 'false')) USING sid;
    END IF;
    GET DIAGNOSTICS queued = ROW_COUNT;
    IF queued > 0 THEN
        PERFORM pg_notify('pgrag_sources', sid::text);
    END IF;
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION pgrag.table_source_changed() FROM PUBLIC;

-- A key limited to collections sees only the sources of those collections and their
-- queue entries: the one scope function of every policy, on the row's collection (looked
-- up by name: a source names its collection before pgrag creates it). Both tables stay
-- local on a Citus coordinator, where a policy may read another table.
ALTER TABLE pgrag.table_sources ENABLE ROW LEVEL SECURITY;
CREATE POLICY scoped ON pgrag.table_sources FOR SELECT TO PUBLIC
    USING (pgrag.collection_in_scope(
        (SELECT c.id FROM pgrag.collections c WHERE c.name = collection)));
ALTER TABLE pgrag.source_queue ENABLE ROW LEVEL SECURITY;
CREATE POLICY scoped ON pgrag.source_queue FOR SELECT TO PUBLIC
    USING (pgrag.collection_in_scope(
        (SELECT c.id FROM pgrag.table_sources s JOIN pgrag.collections c ON c.name = s.collection
         WHERE s.id = source_id)));
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pgrag_scoped') THEN
        GRANT SELECT ON pgrag.table_sources, pgrag.source_queue TO pgrag_scoped;
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'pgrag: cannot grant to pgrag_scoped';
END
$$;
