-- Table sources (issue 40): one queue entry per statement instead of one per changed row,
-- and an index for the vector stage (below).
--
-- A source's triggers now call a function generated for that source (its column list
-- compiled in, so PL/pgSQL plans its statements once per session), and a statement queues
-- the keys it changed as one entry: `keys`, the keys' text (the value of a single integer,
-- text, uuid or numeric key column, named by table_sources.key_cast; otherwise each key's
-- JSON object). The drain splits a long entry into entries of a batch's size as it claims
-- them. Entries queued before this version (one `key` each) are drained as before.

ALTER TABLE pgrag.source_queue ADD COLUMN keys text[];
-- out of line but not compressed: a bulk statement's keys are written once and read once,
-- and compressing a 100,000-key array costs the writer more than the bytes saved
ALTER TABLE pgrag.source_queue ALTER COLUMN keys SET STORAGE EXTERNAL;
-- the single key column's type when keys hold its values as text (NULL: JSON objects)
ALTER TABLE pgrag.table_sources ADD COLUMN key_cast text;
ALTER TABLE pgrag.source_queue ADD CONSTRAINT source_queue_keys_check
    CHECK (cardinality(keys) > 0);

-- The vector stage takes a round of documents' vectors out by document (DELETE … WHERE
-- document_id = ANY(…), store/vector_batches.py and store/vectors.py): without an index
-- each round scanned every vector of the set, a cost that grew with the collection.
CREATE INDEX embeddings_document_idx ON pgrag.embeddings (document_id);
