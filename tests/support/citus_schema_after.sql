-- Step 2 of 2, after pgrag.db.distributed.distribute(): the keys again, now carrying the
-- distribution column (a distributed table may only reference a co-located distributed
-- table by its distribution column, or a reference table). The graph tables' foreign keys
-- to documents and chunks (dropped in step 1) cannot come back while they stay local.
ALTER TABLE pgrag.embedding_sets ADD FOREIGN KEY (collection_id) REFERENCES pgrag.collections (id) ON DELETE CASCADE;
ALTER TABLE pgrag.collections ADD CONSTRAINT collections_active_set_fk FOREIGN KEY (active_set_id) REFERENCES pgrag.embedding_sets (id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE pgrag.documents ADD FOREIGN KEY (collection_id) REFERENCES pgrag.collections (id) ON DELETE CASCADE;
ALTER TABLE pgrag.units ADD FOREIGN KEY (collection_id, document_id) REFERENCES pgrag.documents (collection_id, id) ON DELETE CASCADE;
ALTER TABLE pgrag.sheet_rows ADD FOREIGN KEY (collection_id, unit_id) REFERENCES pgrag.units (collection_id, id) ON DELETE CASCADE;
ALTER TABLE pgrag.chunks ADD FOREIGN KEY (collection_id, document_id) REFERENCES pgrag.documents (collection_id, id) ON DELETE CASCADE;
ALTER TABLE pgrag.chunks ADD FOREIGN KEY (collection_id, unit_id) REFERENCES pgrag.units (collection_id, id) ON DELETE CASCADE;
ALTER TABLE pgrag.embeddings ADD FOREIGN KEY (collection_id, chunk_id) REFERENCES pgrag.chunks (collection_id, id) ON DELETE CASCADE;
ALTER TABLE pgrag.embeddings ADD FOREIGN KEY (set_id) REFERENCES pgrag.embedding_sets (id) ON DELETE CASCADE;
