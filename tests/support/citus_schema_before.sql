-- What pgrag's schema must change before Citus distributes it by collection (issue 16).
-- NOT a migration: it changes single-server behaviour (new NOT NULL collection_id columns
-- the ingest code does not write yet, dropped triggers and row-security policies), so it
-- is applied only by tests/test_citus.py to prove that, with these changes, the tables
-- distribute, co-locate and route (docs/scale-out.md lists what else is still missing).
-- Step 1 of 2, before pgrag.db.distributed.distribute(): everything Citus refuses once a
-- table is in its metadata (ALTER on a table with an identity column, policies, triggers).
DROP POLICY scoped ON pgrag.collections; DROP POLICY scoped ON pgrag.embedding_sets; DROP POLICY scoped ON pgrag.documents; DROP POLICY scoped ON pgrag.chunks; DROP POLICY scoped ON pgrag.units; DROP POLICY scoped ON pgrag.sheet_rows; DROP POLICY scoped ON pgrag.embeddings; DROP POLICY scoped ON pgrag.language_sums;
DROP TRIGGER documents_changed ON pgrag.documents;
DROP TRIGGER embeddings_lang ON pgrag.embeddings;
DROP TRIGGER embeddings_sums_added ON pgrag.embeddings;
DROP TRIGGER embeddings_sums_removed ON pgrag.embeddings;
ALTER TABLE pgrag.collections DROP CONSTRAINT collections_active_set_fk;
ALTER TABLE pgrag.embedding_sets DROP CONSTRAINT embedding_sets_collection_id_fkey;
ALTER TABLE pgrag.documents DROP CONSTRAINT documents_collection_id_fkey;
ALTER TABLE pgrag.chunks DROP CONSTRAINT chunks_collection_id_fkey;
ALTER TABLE pgrag.embeddings DROP CONSTRAINT embeddings_set_id_fkey;
ALTER TABLE pgrag.documents DROP CONSTRAINT documents_pkey CASCADE;
ALTER TABLE pgrag.documents ADD PRIMARY KEY (collection_id, id);
ALTER TABLE pgrag.units ADD COLUMN collection_id bigint NOT NULL;
ALTER TABLE pgrag.units DROP CONSTRAINT units_pkey CASCADE;
ALTER TABLE pgrag.units ADD PRIMARY KEY (collection_id, id);
ALTER TABLE pgrag.units DROP CONSTRAINT units_document_id_kind_number_key;
ALTER TABLE pgrag.units ADD UNIQUE (collection_id, document_id, kind, number);
ALTER TABLE pgrag.sheet_rows ADD COLUMN collection_id bigint NOT NULL;
ALTER TABLE pgrag.sheet_rows DROP CONSTRAINT sheet_rows_pkey;
ALTER TABLE pgrag.sheet_rows ADD PRIMARY KEY (collection_id, unit_id, row_number);
ALTER TABLE pgrag.chunks DROP CONSTRAINT chunks_pkey CASCADE;
ALTER TABLE pgrag.chunks ADD PRIMARY KEY (collection_id, id);
ALTER TABLE pgrag.chunks DROP CONSTRAINT chunks_document_id_ordinal_key;
ALTER TABLE pgrag.chunks ADD UNIQUE (collection_id, document_id, ordinal);
ALTER TABLE pgrag.embeddings ADD COLUMN collection_id bigint NOT NULL;
ALTER TABLE pgrag.embeddings DROP CONSTRAINT embeddings_pkey;
ALTER TABLE pgrag.embeddings ADD PRIMARY KEY (collection_id, set_id, chunk_id);
ALTER TABLE pgrag.language_sums ADD COLUMN collection_id bigint NOT NULL;
ALTER TABLE pgrag.language_sums DROP CONSTRAINT language_sums_pkey;
ALTER TABLE pgrag.language_sums ADD PRIMARY KEY (collection_id, id);
