-- Distribution keys (issue 16): every large table carries collection_id, and every primary
-- key, unique constraint and foreign key between large tables includes it, so that Citus
-- can distribute them co-located by collection (pgrag.db.distributed, docs/scale-out.md).
-- On a single server this changes nothing a query sees: the new keys lead with the old
-- ones, so lookups use them as before, and the id primary keys stay (on Citus, which
-- cannot enforce them across shards, pgrag.db.distributed replaces them with
-- (id, collection_id)). The ingest, reindex and write code write collection_id; on a
-- single server the embeddings trigger also fills it from the chunk, for inserts by hand.

-- 1. The column, filled from the row's parent.
ALTER TABLE pgrag.units ADD COLUMN collection_id bigint;
UPDATE pgrag.units u SET collection_id = d.collection_id
FROM pgrag.documents d WHERE d.id = u.document_id;
ALTER TABLE pgrag.units ALTER COLUMN collection_id SET NOT NULL;

ALTER TABLE pgrag.sheet_rows ADD COLUMN collection_id bigint;
UPDATE pgrag.sheet_rows r SET collection_id = u.collection_id
FROM pgrag.units u WHERE u.id = r.unit_id;
ALTER TABLE pgrag.sheet_rows ALTER COLUMN collection_id SET NOT NULL;

ALTER TABLE pgrag.embeddings ADD COLUMN collection_id bigint;
UPDATE pgrag.embeddings e SET collection_id = c.collection_id
FROM pgrag.chunks c WHERE c.id = e.chunk_id;
ALTER TABLE pgrag.embeddings ALTER COLUMN collection_id SET NOT NULL;

-- sums of deleted sets are dropped by compaction anyway; they have no collection left
DELETE FROM pgrag.language_sums ls
WHERE NOT EXISTS (SELECT 1 FROM pgrag.embedding_sets es WHERE es.id = ls.set_id);
ALTER TABLE pgrag.language_sums ADD COLUMN collection_id bigint;
UPDATE pgrag.language_sums ls SET collection_id = es.collection_id
FROM pgrag.embedding_sets es WHERE es.id = ls.set_id;
ALTER TABLE pgrag.language_sums ALTER COLUMN collection_id SET NOT NULL;

-- 2. Keys. The foreign keys into units and chunks and from the other large tables go
-- first, then come back carrying collection_id. documents, units and chunks keep their
-- primary key on the id (queries grouping by it stay valid); (id, collection_id) is a
-- second unique key the foreign keys reference, and on Citus it becomes the primary key.
ALTER TABLE pgrag.units DROP CONSTRAINT units_document_id_fkey;
ALTER TABLE pgrag.sheet_rows DROP CONSTRAINT sheet_rows_unit_id_fkey;
ALTER TABLE pgrag.chunks DROP CONSTRAINT chunks_document_id_fkey;
ALTER TABLE pgrag.chunks DROP CONSTRAINT chunks_unit_id_fkey;
ALTER TABLE pgrag.embeddings DROP CONSTRAINT embeddings_chunk_id_fkey;

ALTER TABLE pgrag.documents ADD CONSTRAINT documents_id_collection_id_key UNIQUE (id, collection_id);
ALTER TABLE pgrag.units ADD CONSTRAINT units_id_collection_id_key UNIQUE (id, collection_id);
ALTER TABLE pgrag.chunks ADD CONSTRAINT chunks_id_collection_id_key UNIQUE (id, collection_id);

ALTER TABLE pgrag.units DROP CONSTRAINT units_document_id_kind_number_key;
ALTER TABLE pgrag.units ADD CONSTRAINT units_document_id_kind_number_key
    UNIQUE (document_id, kind, number, collection_id);

ALTER TABLE pgrag.sheet_rows DROP CONSTRAINT sheet_rows_pkey;
ALTER TABLE pgrag.sheet_rows ADD CONSTRAINT sheet_rows_pkey
    PRIMARY KEY (unit_id, row_number, collection_id);

ALTER TABLE pgrag.chunks DROP CONSTRAINT chunks_document_id_ordinal_key;
ALTER TABLE pgrag.chunks ADD CONSTRAINT chunks_document_id_ordinal_key
    UNIQUE (document_id, ordinal, collection_id);

ALTER TABLE pgrag.embeddings DROP CONSTRAINT embeddings_pkey;
ALTER TABLE pgrag.embeddings ADD CONSTRAINT embeddings_pkey
    PRIMARY KEY (set_id, chunk_id, collection_id);

ALTER TABLE pgrag.language_sums DROP CONSTRAINT language_sums_pkey;
ALTER TABLE pgrag.language_sums ADD CONSTRAINT language_sums_pkey PRIMARY KEY (id, collection_id);

ALTER TABLE pgrag.units ADD CONSTRAINT units_document_fkey FOREIGN KEY (document_id, collection_id)
    REFERENCES pgrag.documents (id, collection_id) ON DELETE CASCADE;
ALTER TABLE pgrag.sheet_rows ADD CONSTRAINT sheet_rows_unit_fkey FOREIGN KEY (unit_id, collection_id)
    REFERENCES pgrag.units (id, collection_id) ON DELETE CASCADE;
ALTER TABLE pgrag.chunks ADD CONSTRAINT chunks_document_fkey FOREIGN KEY (document_id, collection_id)
    REFERENCES pgrag.documents (id, collection_id) ON DELETE CASCADE;
ALTER TABLE pgrag.chunks ADD CONSTRAINT chunks_unit_fkey FOREIGN KEY (unit_id, collection_id)
    REFERENCES pgrag.units (id, collection_id) ON DELETE CASCADE;
ALTER TABLE pgrag.embeddings ADD CONSTRAINT embeddings_chunk_fkey FOREIGN KEY (chunk_id, collection_id)
    REFERENCES pgrag.chunks (id, collection_id) ON DELETE CASCADE;

-- 3. Triggers write the new column (single server; on Citus the writer does, see
-- pgrag.write_language_sums).
CREATE OR REPLACE FUNCTION pgrag.embedding_lang() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT coalesce(c.lang, 'und'), c.document_id, c.collection_id
    INTO NEW.lang, NEW.document_id, NEW.collection_id
    FROM pgrag.chunks c WHERE c.id = NEW.chunk_id;
    NEW.lang := coalesce(NEW.lang, 'und');
    RETURN NEW;
END
$$;

CREATE OR REPLACE FUNCTION pgrag.language_sums_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgrag.language_sums (collection_id, set_id, lang, n, documents, total)
    SELECT d.collection_id, d.set_id, d.lang, sum(d.n), count(*), sum(d.mean)
    FROM (SELECT r.collection_id, r.set_id, r.lang, count(*) AS n, avg(r.embedding) AS mean
          FROM added r GROUP BY r.collection_id, r.set_id, r.lang, r.document_id) d
    GROUP BY d.collection_id, d.set_id, d.lang;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION pgrag.language_sums_removed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgrag.language_sums (collection_id, set_id, lang, n, documents, total)
    SELECT d.collection_id, d.set_id, d.lang, -sum(d.n), -count(*), pgrag.vector_negate(sum(d.mean))
    FROM (SELECT r.collection_id, r.set_id, r.lang, count(*) AS n, avg(r.embedding) AS mean
          FROM removed r
          WHERE EXISTS (SELECT 1 FROM pgrag.embedding_sets es WHERE es.id = r.set_id)
          GROUP BY r.collection_id, r.set_id, r.lang, r.document_id) d
    GROUP BY d.collection_id, d.set_id, d.lang;
    RETURN NULL;
END
$$;

-- 4. Row-level security on the column itself: no subquery (Citus refuses policies with
-- one), the same rows as before (a row's collection is its document's, unit's and set's).
DROP POLICY scoped ON pgrag.units;
CREATE POLICY scoped ON pgrag.units FOR SELECT TO PUBLIC
    USING (pgrag.collection_in_scope(collection_id));
DROP POLICY scoped ON pgrag.sheet_rows;
CREATE POLICY scoped ON pgrag.sheet_rows FOR SELECT TO PUBLIC
    USING (pgrag.collection_in_scope(collection_id));
DROP POLICY scoped ON pgrag.embeddings;
CREATE POLICY scoped ON pgrag.embeddings FOR SELECT TO PUBLIC
    USING (pgrag.collection_in_scope(collection_id));
DROP POLICY scoped ON pgrag.language_sums;
CREATE POLICY scoped ON pgrag.language_sums FOR SELECT TO PUBLIC
    USING (pgrag.collection_in_scope(collection_id));
