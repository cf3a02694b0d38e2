-- Table sources: registering a table, reading its rows by key, the backfill, checks.
--
-- The registry and the queue are in sql/migrations/0030 and 0034, each source's trigger
-- function in 81_table_source_triggers.sql. Every
-- statement on a source's table is built here from the registry's column names, quoted
-- with format('%I') (the table with its regclass text, which PostgreSQL quotes); values
-- travel as parameters only.

-- The names of a source's triggers (one per event: transition tables allow one event per
-- trigger).
CREATE OR REPLACE FUNCTION pgrag.table_source_triggers(sid bigint)
RETURNS TABLE (trigger_name text, event text)
LANGUAGE sql IMMUTABLE AS $$
    SELECT format('pgrag_source_%s_%s', sid, e.suffix), e.event
    FROM (VALUES ('ins', 'INSERT'), ('upd', 'UPDATE'), ('del', 'DELETE'),
                 ('trunc', 'TRUNCATE')) AS e(suffix, event)
$$;

CREATE OR REPLACE FUNCTION pgrag.drop_table_source_triggers(sid bigint, rel regclass)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    t record;
BEGIN
    IF rel IS NULL OR NOT EXISTS (SELECT 1 FROM pg_class WHERE oid = rel) THEN
        RETURN;  -- the table was dropped, and its triggers with it
    END IF;
    FOR t IN SELECT * FROM pgrag.table_source_triggers(sid) LOOP
        EXECUTE format('DROP TRIGGER IF EXISTS %I ON %s', t.trigger_name, rel);
    END LOOP;
END
$$;

-- Statement-level triggers with transition tables (bulk writes queue their keys in one
-- statement each); on a logical-replication subscriber (`replica`), row-level triggers set
-- to ENABLE ALWAYS, since the apply worker fires only those, and only when told to.
CREATE OR REPLACE FUNCTION pgrag.create_table_source_triggers(
    sid bigint, rel regclass, replica boolean
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT * FROM pgrag.table_source_triggers(sid) LOOP
        EXECUTE format(
            'CREATE TRIGGER %I AFTER %s ON %s %s FOR EACH %s '
            'EXECUTE FUNCTION pgrag.%I()',
            t.trigger_name, t.event, rel,
            CASE WHEN replica OR t.event = 'TRUNCATE' THEN ''
                 WHEN t.event = 'INSERT' THEN 'REFERENCING NEW TABLE AS new_rows'
                 WHEN t.event = 'DELETE' THEN 'REFERENCING OLD TABLE AS old_rows'
                 ELSE 'REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows' END,
            CASE WHEN replica AND t.event <> 'TRUNCATE' THEN 'ROW' ELSE 'STATEMENT' END,
            format('table_source_changed_%s', sid));
        IF replica THEN
            EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', rel, t.trigger_name);
        END IF;
    END LOOP;
END
$$;

-- Why a source's table cannot be read as registered (NULL: it can): the table or a column
-- dropped or renamed. Catalogue reads only: the drain asks before every batch.
CREATE OR REPLACE FUNCTION pgrag.table_source_problem(sid bigint) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
    s pgrag.table_sources;
    gone text[];
BEGIN
    SELECT * INTO s FROM pgrag.table_sources WHERE id = sid;
    IF NOT FOUND THEN
        RETURN 'no such source';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_class WHERE oid = s.relation) THEN
        RETURN format('the table of source %s was dropped', s.name);
    END IF;
    SELECT array_agg(c ORDER BY c) INTO gone
    FROM unnest(s.id_columns || s.text_columns || s.metadata_columns
                || coalesce(ARRAY[s.title_column], '{}')) c
    WHERE c IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM pg_attribute a
        WHERE a.attrelid = s.relation AND a.attname = c AND a.attnum > 0 AND NOT a.attisdropped);
    IF gone IS NOT NULL THEN
        RETURN format('column %s of %s is gone (dropped or renamed): add the source again '
                      'with the columns it has now', array_to_string(gone, ', '), s.relation);
    END IF;
    IF NOT has_table_privilege(s.relation, 'SELECT') THEN
        RETURN format('cannot read %s: GRANT SELECT ON TABLE %s TO %I', s.relation, s.relation,
                      current_user);
    END IF;
    RETURN NULL;
END
$$;

-- Can `rel` be a source with these columns? Raises the one-line reason when not (the
-- GRANT to run, a missing column, no unique key, a distributed Citus table); returns the
-- key columns (id_columns NULL: the primary key's).
CREATE OR REPLACE FUNCTION pgrag.table_source_key(
    rel regclass, id_columns text[], text_columns text[], title_column text,
    metadata_columns text[]
) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    missing     text[];
    distributed boolean;
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = rel) NOT IN ('r', 'p') THEN
        RAISE EXCEPTION 'pgrag: % is not a table', rel USING ERRCODE = 'wrong_object_type';
    END IF;
    IF NOT has_table_privilege(rel, 'TRIGGER') THEN
        RAISE EXCEPTION 'pgrag: cannot create triggers on %: GRANT TRIGGER ON TABLE % TO %',
            rel, rel, quote_ident(current_user) USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NOT has_table_privilege(rel, 'SELECT') THEN
        RAISE EXCEPTION 'pgrag: cannot read %: GRANT SELECT ON TABLE % TO %',
            rel, rel, quote_ident(current_user) USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- Citus fires no trigger on a distributed or reference table's shards for pgrag to
    -- see (and refuses triggers on reference tables): only local tables are sources
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = $1 '
                'AND (partmethod <> ''n'' OR repmodel = ''t''))' INTO STRICT distributed USING rel;
        IF distributed THEN
            RAISE EXCEPTION 'pgrag: % is a distributed or reference Citus table: pgrag indexes '
                'tables local to the coordinator only', rel USING ERRCODE = 'feature_not_supported';
        END IF;
    END IF;
    IF id_columns IS NULL THEN
        SELECT array_agg(a.attname::text ORDER BY k.n) INTO id_columns
        FROM pg_index i
        CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
        JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
        WHERE i.indrelid = rel AND i.indisprimary;
        IF id_columns IS NULL THEN
            RAISE EXCEPTION 'pgrag: % has no primary key: name its key columns (--id)', rel
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    SELECT array_agg(c) INTO missing
    FROM unnest(id_columns || text_columns || metadata_columns
                || CASE WHEN title_column IS NULL THEN '{}'::text[] ELSE ARRAY[title_column] END) c
    WHERE c IS NULL OR NOT EXISTS (
        SELECT 1 FROM pg_attribute a
        WHERE a.attrelid = rel AND a.attname = c AND a.attnum > 0 AND NOT a.attisdropped);
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'pgrag: % has no column %', rel, array_to_string(missing, ', ')
            USING ERRCODE = 'undefined_column';
    END IF;
    IF coalesce(cardinality(text_columns), 0) = 0 THEN
        RAISE EXCEPTION 'pgrag: name at least one text column'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (
        SELECT 1 FROM pg_index i
        WHERE i.indrelid = rel AND i.indisunique AND i.indpred IS NULL
          AND i.indnkeyatts = cardinality(id_columns)
          AND (SELECT array_agg(a.attname::text ORDER BY a.attname)
               FROM unnest(i.indkey[0:i.indnkeyatts - 1]) k
               JOIN pg_attribute a ON a.attrelid = rel AND a.attnum = k)
              = (SELECT array_agg(c ORDER BY c) FROM unnest(id_columns) c)) THEN
        RAISE EXCEPTION 'pgrag: % is not a unique key of %: name the primary key (--id)',
            array_to_string(id_columns, ', '), rel USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN id_columns;
END
$$;

-- Register a table (or change a registered one in place: its documents stay, and only rows
-- whose text, title or metadata changed are written again). id_columns NULL: the primary
-- key. Creates the triggers and starts the backfill (the drain queues the existing rows in
-- keyset batches). replica NULL: detected (the table is subscribed to a publication).
CREATE OR REPLACE FUNCTION pgrag.add_table_source(
    source_table     regclass,
    text_columns     text[],
    id_columns       text[] DEFAULT NULL,
    title_column     text DEFAULT NULL,
    metadata_columns text[] DEFAULT '{}',
    collection       text DEFAULT 'default',
    source_name      text DEFAULT NULL,
    replica          boolean DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    rel      regclass := source_table;
    sname    text := coalesce(source_name, source_table::text);
    keys     text[];
    old      pgrag.table_sources;
    sid      bigint;
    total    bigint;
BEGIN
    keys := pgrag.table_source_key(rel, id_columns, text_columns, title_column,
                                   coalesce(metadata_columns, '{}'));
    replica := coalesce(replica, EXISTS (SELECT 1 FROM pg_subscription_rel WHERE srrelid = rel));
    SELECT * INTO old FROM pgrag.table_sources t WHERE t.name = sname FOR UPDATE;
    IF FOUND AND old.state = 'removed' THEN
        RAISE EXCEPTION 'pgrag: source % is being removed: run `pgrag source sync` first', sname
            USING ERRCODE = 'object_in_use';
    END IF;
    IF FOUND AND old.collection <> add_table_source.collection THEN
        RAISE EXCEPTION 'pgrag: source % indexes into collection %: remove it first to move it',
            sname, old.collection USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE format('SELECT count(*) FROM %s', rel) INTO total;
    IF old.id IS NOT NULL THEN
        PERFORM pgrag.drop_table_source_triggers(old.id, old.relation);
        UPDATE pgrag.table_sources t
           SET relation = rel, id_columns = keys, text_columns = add_table_source.text_columns,
               title_column = add_table_source.title_column,
               metadata_columns = coalesce(add_table_source.metadata_columns, '{}'),
               state = 'backfilling', failure = NULL, backfill_cursor = NULL,
               backfill_done = 0, backfill_total = total, backfill_started_at = now(),
               updated_at = now()
         WHERE t.id = old.id;
        sid := old.id;
        IF old.id_columns IS DISTINCT FROM keys OR old.relation <> rel THEN
            -- documents are named by key: the old key form's go as after a TRUNCATE (the
            -- drain deletes those whose row it cannot find), the backfill adds the new
            INSERT INTO pgrag.source_queue (source_id, keys) VALUES (sid, NULL);
        END IF;
    ELSE
        INSERT INTO pgrag.table_sources (name, relation, id_columns, text_columns, title_column,
                                         metadata_columns, collection, backfill_total,
                                         backfill_started_at)
        VALUES (sname, rel, keys, text_columns, title_column,
                coalesce(metadata_columns, '{}'), add_table_source.collection, total, now())
        RETURNING id INTO sid;
    END IF;
    PERFORM pgrag.compile_table_source(sid);
    PERFORM pgrag.create_table_source_triggers(sid, rel, replica);
    PERFORM pg_notify('pgrag_sources', sid::text);
    RETURN sid;
END
$$;

-- Stop following a source: its triggers and queue go at once; its documents are deleted by
-- the next drain (`pgrag source remove` runs it), which then forgets the source.
CREATE OR REPLACE FUNCTION pgrag.remove_table_source(source_name text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    s pgrag.table_sources;
BEGIN
    SELECT * INTO s FROM pgrag.table_sources WHERE name = source_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM pgrag.drop_table_source_triggers(s.id, s.relation);
    PERFORM pgrag.drop_table_source_function(s.id);
    DELETE FROM pgrag.source_queue WHERE source_id = s.id;
    UPDATE pgrag.table_sources SET state = 'removed', updated_at = now() WHERE id = s.id;
    PERFORM pg_notify('pgrag_sources', s.id::text);
    RETURN true;
END
$$;

-- The rows of these keys as they are now: each key with the row's title, its text columns
-- (as text, in the registry's order) and its metadata columns (as JSON). A key whose row is
-- gone is not returned.
CREATE OR REPLACE FUNCTION pgrag.table_source_rows(sid bigint, keys jsonb)
RETURNS TABLE (key jsonb, title text, texts text[], metadata jsonb)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    s pgrag.table_sources;
BEGIN
    SELECT * INTO STRICT s FROM pgrag.table_sources WHERE id = sid;
    RETURN QUERY EXECUTE format(
        'SELECT %1$s, %2$s, ARRAY[%3$s]::text[], %4$s '
        'FROM %5$s r JOIN jsonb_populate_recordset(NULL::%5$s, $1) k ON %6$s',
        (SELECT 'jsonb_build_object(' || string_agg(format('%L, r.%I', c, c), ', ') || ')'
           FROM unnest(s.id_columns) c),
        CASE WHEN s.title_column IS NULL THEN 'NULL::text'
             ELSE format('r.%I::text', s.title_column) END,
        (SELECT string_agg(format('r.%I::text', c), ', ') FROM unnest(s.text_columns) c),
        (SELECT coalesce('jsonb_build_object(' || string_agg(format('%L, r.%I', c, c), ', ')
                         || ')', '''{}''::jsonb')
           FROM unnest(s.metadata_columns) c),
        s.relation,
        (SELECT string_agg(format('r.%I = k.%I', c, c), ' AND ') FROM unnest(s.id_columns) c))
    USING keys;
END
$$;

-- The backfill's next step: queue the keys of up to `batch` rows after the cursor (key
-- order) as one queue entry, move the cursor and count them, in one statement; the last
-- step (fewer rows than `batch`) marks the source ready. A crash between steps resumes
-- from the cursor. Returns the number of keys queued.
CREATE OR REPLACE FUNCTION pgrag.table_source_backfill(sid bigint, batch int) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    s pgrag.table_sources;
    cols text;
    n int;
    last jsonb;
BEGIN
    SELECT * INTO s FROM pgrag.table_sources WHERE id = sid AND state = 'backfilling' FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    SELECT string_agg(format('r.%I', c), ', ') INTO cols FROM unnest(s.id_columns) c;
    EXECUTE format(
        'WITH picked AS ('
        '  SELECT %1$s AS key, %5$s AS raw, row_number() OVER (ORDER BY %2$s) AS n '
        '  FROM %3$s r %4$s ORDER BY %2$s LIMIT $2), '
        ' queued AS (INSERT INTO pgrag.source_queue (source_id, keys) '
        '            SELECT $1, array_agg(p.raw ORDER BY p.n) FROM picked p HAVING count(*) > 0) '
        'SELECT count(*)::int, (SELECT p.key FROM picked p ORDER BY p.n DESC LIMIT 1) FROM picked',
        (SELECT 'jsonb_build_object(' || string_agg(format('%L, r.%I', c, c), ', ') || ')'
           FROM unnest(s.id_columns) c),
        cols, s.relation,
        CASE WHEN s.backfill_cursor IS NULL THEN ''
             ELSE format('WHERE ROW(%s) > ROW(%s)', cols,
                         (SELECT string_agg(format('($3 ->> %L)::%s', a.attname,
                                                   format_type(a.atttypid, a.atttypmod)),
                                            ', ' ORDER BY k.n)
                            FROM unnest(s.id_columns) WITH ORDINALITY AS k(c, n)
                            JOIN pg_attribute a ON a.attrelid = s.relation AND a.attname = k.c))
             END,
        pgrag.table_source_key_sql(s.id_columns, s.key_cast, 'r'))
        INTO n, last USING sid, batch, s.backfill_cursor;
    UPDATE pgrag.table_sources
       SET backfill_cursor = coalesce(last, backfill_cursor), backfill_done = backfill_done + n,
           state = CASE WHEN n < batch THEN 'ready' ELSE state END, updated_at = now()
     WHERE id = sid;
    RETURN n;
END
$$;

-- Which of these keys have no row any more (after a TRUNCATE, the keys of every document
-- of the source): the local table only, so on Citus no distributed table joins it.
CREATE OR REPLACE FUNCTION pgrag.table_source_missing(sid bigint, keys jsonb)
RETURNS SETOF jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    s pgrag.table_sources;
BEGIN
    SELECT * INTO STRICT s FROM pgrag.table_sources WHERE id = sid;
    RETURN QUERY EXECUTE format(
        'SELECT j FROM jsonb_array_elements($1) j WHERE NOT EXISTS ('
        ' SELECT 1 FROM jsonb_populate_record(NULL::%s, j) k JOIN %s r ON %s)',
        s.relation, s.relation,
        (SELECT string_agg(format('r.%I = k.%I', c, c), ' AND ') FROM unnest(s.id_columns) c))
    USING keys;
END
$$;

-- Per source: what `pgrag source list`, status, the console and metrics show. Exact counts
-- (bigint): pending is the distinct keys queued (counted in the entries' key arrays) plus
-- the rows the backfill has yet to queue.
CREATE OR REPLACE FUNCTION pgrag.table_source_stats()
RETURNS TABLE (id bigint, name text, relation text, collection text, state text,
               failure text, indexed bigint, failed bigint, queued bigint,
               backfill_left bigint, pending bigint, backfill_done bigint,
               backfill_total bigint, backfill_started_at timestamptz,
               lag_seconds double precision, synced_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
    -- grouped first: on Citus the documents are counted on the shards, then joined here
    -- (PL/pgSQL: Citus plans no LANGUAGE sql function over a distributed table)
    RETURN QUERY WITH d AS MATERIALIZED (
        SELECT doc.table_source_id,
               count(*) FILTER (WHERE doc.status <> 'failed') AS indexed,
               count(*) FILTER (WHERE doc.status = 'failed') AS failed
        FROM pgrag.documents doc WHERE doc.table_source_id IS NOT NULL
        GROUP BY doc.table_source_id),
    q AS (
        SELECT qq.source_id, count(DISTINCT coalesce(u.raw, qq.key::text)) AS queued,
               min(qq.queued_at) AS oldest
        FROM pgrag.source_queue qq LEFT JOIN LATERAL unnest(qq.keys) AS u(raw) ON true
        GROUP BY qq.source_id)
    SELECT s.id, s.name,
           CASE WHEN EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = s.relation)
                THEN s.relation::text ELSE format('(dropped table %s)', s.relation::oid) END,
           s.collection, s.state,
           s.failure,
           coalesce(d.indexed, 0), coalesce(d.failed, 0), coalesce(q.queued, 0),
           CASE WHEN s.state = 'backfilling'
                THEN greatest(coalesce(s.backfill_total, 0) - s.backfill_done, 0) ELSE 0 END,
           coalesce(q.queued, 0) + CASE WHEN s.state = 'backfilling'
                THEN greatest(coalesce(s.backfill_total, 0) - s.backfill_done, 0) ELSE 0 END,
           s.backfill_done, s.backfill_total, s.backfill_started_at,
           coalesce(extract(epoch FROM now() - q.oldest), 0)::double precision,
           s.synced_at
    FROM pgrag.table_sources s
    LEFT JOIN d ON d.table_source_id = s.id
    LEFT JOIN q ON q.source_id = s.id
    ORDER BY s.name;
END
$$;
