-- Table sources: the trigger function generated for each source, and claiming its queue.
--
-- Each source has its own trigger function, pgrag.table_source_changed_<id>(), generated
-- by pgrag.compile_table_source() from the registry when the source is added: the column
-- names are compiled in (quoted with format('%I'), the function body passed as a literal
-- with format('%L')), so its statements are static and PL/pgSQL plans each once per
-- session (no registry read, no format(), no EXECUTE per write). A statement queues the
-- keys it changed as one entry (source_queue.keys); the drain splits long entries as it
-- claims them (pgrag.table_source_claim).

-- The single key column's type when its text form is canonical (an integer, text, uuid or
-- numeric key: the value's text is queued and cast back by the drain); NULL otherwise
-- (each key is queued as its JSON object's text).
CREATE OR REPLACE FUNCTION pgrag.table_source_key_cast(rel regclass, id_columns text[])
RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT format_type(a.atttypid, NULL) FROM pg_attribute a
    WHERE cardinality(id_columns) = 1 AND a.attrelid = rel AND a.attname = id_columns[1]
      AND a.attnum > 0 AND NOT a.attisdropped
      AND a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype, 'text'::regtype,
                         'varchar'::regtype, 'uuid'::regtype, 'numeric'::regtype)
$$;

-- The text a source's trigger queues for the row `p` (a row alias or OLD/NEW): the key
-- value's text, or the key's JSON object as text.
CREATE OR REPLACE FUNCTION pgrag.table_source_key_sql(
    id_columns text[], key_cast text, p text
) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN key_cast IS NOT NULL THEN format('%s.%I::text', p, id_columns[1])
                ELSE 'jsonb_build_object(' || (SELECT string_agg(format('%L, %s.%I', c, p, c), ', ')
                                               FROM unnest(id_columns) c) || ')::text' END
$$;

-- The queueing part of a source's trigger: `watched` is the SQL that is true when an
-- indexed column of rows a and b differs, `same` when their keys are equal ({a}, {b}
-- stand for the two rows' aliases).
CREATE OR REPLACE FUNCTION pgrag.table_source_queue_sql(
    id_columns text[], key_cast text, watched text, same text
) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT format($b$
        IF TG_LEVEL = 'ROW' THEN
            IF TG_OP = 'INSERT' THEN
                k := ARRAY[%1$s];
            ELSIF TG_OP = 'DELETE' THEN
                k := ARRAY[%2$s];
            ELSIF NOT (%3$s) THEN
                k := ARRAY[%2$s, %1$s];
            ELSIF %4$s THEN
                k := ARRAY[%1$s];
            ELSE
                RETURN NULL;
            END IF;
        ELSIF TG_OP = 'INSERT' THEN
            k := ARRAY(SELECT %5$s FROM new_rows r);
        ELSIF TG_OP = 'DELETE' THEN
            k := ARRAY(SELECT %5$s FROM old_rows r);
        ELSE
            -- new or changed rows (a new key, or an indexed column changed), then keys gone
            k := ARRAY(SELECT %5$s FROM new_rows r
                        WHERE NOT EXISTS (SELECT 1 FROM old_rows o WHERE %6$s AND NOT (%7$s))
                       UNION ALL
                       SELECT %5$s FROM old_rows r
                        WHERE NOT EXISTS (SELECT 1 FROM new_rows o WHERE %6$s));
        END IF;$b$,
        pgrag.table_source_key_sql(id_columns, key_cast, 'NEW'),
        pgrag.table_source_key_sql(id_columns, key_cast, 'OLD'),
        replace(replace(same, '{a}', 'OLD'), '{b}', 'NEW'),
        replace(replace(watched, '{a}', 'OLD'), '{b}', 'NEW'),
        pgrag.table_source_key_sql(id_columns, key_cast, 'r'),
        replace(replace(same, '{a}', 'o'), '{b}', 'r'),
        replace(replace(watched, '{a}', 'o'), '{b}', 'r'))
$$;

-- (Re)generate the trigger function of a source from the registry, and record its key
-- form (table_sources.key_cast). The user's writes never fail for pgrag: when a column of
-- the source was dropped or renamed since, the function queues every changed row by key
-- (the drain then marks the source failed), and nothing when a key column is gone.
-- SECURITY DEFINER: the function belongs to pgrag's schema owner, like the queue it
-- writes; the table's writers need no right on the queue.
CREATE OR REPLACE FUNCTION pgrag.compile_table_source(sid bigint) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    s        pgrag.table_sources;
    indexed  text[];
    kcast    text;
    same     text;
    watched  text;
    body     text;
    fname    text := format('table_source_changed_%s', sid);
BEGIN
    SELECT * INTO STRICT s FROM pgrag.table_sources WHERE id = sid;
    indexed := ARRAY(SELECT DISTINCT c FROM unnest(s.text_columns || s.metadata_columns
                                                   || coalesce(ARRAY[s.title_column], '{}')) c
                     WHERE c IS NOT NULL ORDER BY c);
    kcast := pgrag.table_source_key_cast(s.relation, s.id_columns);
    UPDATE pgrag.table_sources SET key_cast = kcast WHERE id = sid;
    -- compared as text: every type has a text form, and no operator of another schema is
    -- looked up (the search path is pg_catalog's)
    SELECT string_agg(format('{a}.%I::text = {b}.%I::text', c, c), ' AND ')
      INTO same FROM unnest(s.id_columns) c;
    SELECT string_agg(format('{a}.%I::text IS DISTINCT FROM {b}.%I::text', c, c), ' OR ')
      INTO watched FROM unnest(indexed) c;
    body := format($b$
DECLARE
    present int;
    keys_present int;
    k text[];
BEGIN
    IF TG_RELID <> %1$s::oid THEN
        RETURN NULL;  -- attached to another table: not this source's
    END IF;
    IF TG_OP = 'TRUNCATE' THEN
        INSERT INTO pgrag.source_queue (source_id, keys) VALUES (%2$s, NULL);
        PERFORM pg_notify('pgrag_sources', '%2$s');
        RETURN NULL;
    END IF;
    SELECT count(*), count(*) FILTER (WHERE a.attname = ANY (%3$L::name[]))
      INTO present, keys_present
      FROM pg_attribute a
     WHERE a.attrelid = %1$s::oid AND a.attname = ANY (%4$L::name[]) AND a.attnum > 0
       AND NOT a.attisdropped;
    IF keys_present < %5$s THEN
        RETURN NULL;  -- a key column is gone: the source must be added again
    ELSIF present = %6$s THEN
        %7$s
    ELSE  -- an indexed column is gone: every changed row (the drain fails the source)
        %8$s
    END IF;
    IF cardinality(k) > 0 THEN
        INSERT INTO pgrag.source_queue (source_id, keys) VALUES (%2$s, k);
        PERFORM pg_notify('pgrag_sources', '%2$s');
    END IF;
    RETURN NULL;
END
$b$,
        s.relation::oid, sid, s.id_columns::text,
        (SELECT array_agg(DISTINCT c) FROM unnest(s.id_columns || indexed) c)::text,
        cardinality(s.id_columns),
        (SELECT count(DISTINCT c) FROM unnest(s.id_columns || indexed) c),
        pgrag.table_source_queue_sql(s.id_columns, kcast, watched, same),
        pgrag.table_source_queue_sql(s.id_columns, kcast, 'true', same));
    EXECUTE format('CREATE OR REPLACE FUNCTION pgrag.%I() RETURNS trigger LANGUAGE plpgsql '
                   'SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS %L', fname, body);
    RETURN fname;
END
$$;
REVOKE EXECUTE ON FUNCTION pgrag.compile_table_source(bigint) FROM PUBLIC;

-- Drop a source's generated trigger function (its triggers are gone).
CREATE OR REPLACE FUNCTION pgrag.drop_table_source_function(sid bigint) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE format('DROP FUNCTION IF EXISTS pgrag.%I()', format('table_source_changed_%s', sid));
END
$$;
REVOKE EXECUTE ON FUNCTION pgrag.drop_table_source_function(bigint) FROM PUBLIC;

-- Split the long entries at the head of a source's queue (its first `head_entries`)
-- into entries of at most `max_keys` keys (same queued_at), in the caller's short
-- transaction: committed before any drainer claims, so several drainers share a bulk
-- statement's keys. Entries another drainer holds are skipped. Returns the entries split.
CREATE OR REPLACE FUNCTION pgrag.table_source_split(sid bigint, max_keys int, head_entries int)
RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    e record;
    n int := 0;
BEGIN
    FOR e IN SELECT q.id, q.keys, q.queued_at FROM pgrag.source_queue q
             WHERE q.source_id = sid AND cardinality(q.keys) > max_keys
               AND q.id IN (SELECT h.id FROM pgrag.source_queue h WHERE h.source_id = sid
                            ORDER BY h.id LIMIT head_entries)
             ORDER BY q.id FOR UPDATE SKIP LOCKED LOOP
        INSERT INTO pgrag.source_queue (source_id, keys, queued_at)
        SELECT sid, e.keys[i:i + max_keys - 1], e.queued_at
        FROM generate_series(max_keys + 1, cardinality(e.keys), max_keys) i;
        UPDATE pgrag.source_queue q SET keys = e.keys[1:max_keys]
         WHERE q.source_id = sid AND q.id = e.id;
        n := n + 1;
    END LOOP;
    IF n > 0 THEN
        PERFORM pg_notify('pgrag_sources', sid::text);  -- the other drainers: more entries
    END IF;
    RETURN n;
END
$$;

-- Claim up to `max_keys` queued keys of a source, oldest entries first, for the caller's
-- transaction (FOR UPDATE SKIP LOCKED, fetched one entry at a time so that only the entries
-- taken are locked: several drainers share a queue). An entry longer than what is left
-- (table_source_split has not reached it, or a smaller one came first) is split here: its
-- tail goes back as new entries of at most `max_keys` keys, in the same transaction. One row per key: the entry, the key's queued text and its JSON
-- object (a TRUNCATE's entry: one row, raw and key NULL). Entries of the former one-key
-- form (source_queue.key) are read as one key each.
CREATE OR REPLACE FUNCTION pgrag.table_source_claim(sid bigint, max_keys int)
RETURNS TABLE (entry bigint, raw text, key jsonb)
LANGUAGE plpgsql AS $$
DECLARE
    s      pgrag.table_sources;
    cur    refcursor;
    e      record;
    total  int := 0;
    n      int;
    taken  bigint[] := '{}';
BEGIN
    SELECT * INTO STRICT s FROM pgrag.table_sources t WHERE t.id = sid;
    OPEN cur FOR SELECT q.id, q.key, q.keys, q.queued_at FROM pgrag.source_queue q
                 WHERE q.source_id = sid ORDER BY q.id FOR UPDATE SKIP LOCKED;
    WHILE total < max_keys LOOP
        FETCH cur INTO e;
        EXIT WHEN NOT FOUND;
        n := coalesce(cardinality(e.keys), 0);
        IF total + n > max_keys THEN
            INSERT INTO pgrag.source_queue (source_id, keys, queued_at)
            SELECT sid, e.keys[i:i + max_keys - 1], e.queued_at
            FROM generate_series(max_keys - total + 1, n, max_keys) i;
            UPDATE pgrag.source_queue q SET keys = e.keys[1:max_keys - total]
             WHERE q.source_id = sid AND q.id = e.id;
            n := max_keys - total;
        END IF;
        taken := taken || e.id;
        total := total + greatest(n, 1);
    END LOOP;
    CLOSE cur;
    RETURN QUERY EXECUTE format(
        'SELECT q.id, x.raw, CASE WHEN x.raw IS NULL THEN NULL ELSE %s END '
        'FROM pgrag.source_queue q '
        'LEFT JOIN LATERAL (SELECT u.raw FROM unnest(q.keys) AS u(raw) '
        '                   UNION ALL SELECT %s WHERE q.keys IS NULL AND q.key IS NOT NULL) x '
        '  ON true '
        'WHERE q.source_id = $1 AND q.id = ANY ($2) ORDER BY q.id',
        CASE WHEN s.key_cast IS NULL THEN 'x.raw::jsonb'
             ELSE format('jsonb_build_object(%L, x.raw::%s)', s.id_columns[1], s.key_cast) END,
        CASE WHEN s.key_cast IS NULL THEN 'q.key::text'
             ELSE format('q.key ->> %L', s.id_columns[1]) END)
    USING sid, taken;
END
$$;

-- Whenever these files are applied: each source's generated function is regenerated (a
-- change of what it compiles to), and a source registered before functions were generated
-- (its triggers call the shared pgrag.table_source_changed(), migration 0030) moves to its
-- own, in the same mode (row-level on a subscriber). Moving needs the right to create
-- triggers on the table: without it the source keeps the shared function (which queues one
-- key per entry, drained as before) and a NOTICE says to add it again.
DO $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT s.id, s.name, s.relation,
                    EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = s.relation
                            AND g.tgfoid = 'pgrag.table_source_changed()'::regprocedure)
                        AS shared,
                    EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = s.relation
                            AND g.tgfoid = 'pgrag.table_source_changed()'::regprocedure
                            AND g.tgtype & 1 = 1) AS row_level
             FROM pgrag.table_sources s
             WHERE s.state <> 'removed' AND EXISTS (SELECT 1 FROM pg_class c
                                                    WHERE c.oid = s.relation) LOOP
        IF NOT t.shared THEN
            IF to_regprocedure(format('pgrag.table_source_changed_%s()', t.id)) IS NOT NULL THEN
                PERFORM pgrag.compile_table_source(t.id);
            END IF;
            CONTINUE;
        END IF;
        BEGIN
            PERFORM pgrag.compile_table_source(t.id);
            PERFORM pgrag.drop_table_source_triggers(t.id, t.relation);
            PERFORM pgrag.create_table_source_triggers(t.id, t.relation, t.row_level);
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'pgrag: source % keeps its former trigger (%): add it again to move it '
                'to its own', t.name, SQLERRM;
        END;
    END LOOP;
END
$$;
