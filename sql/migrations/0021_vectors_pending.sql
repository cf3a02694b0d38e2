-- Two-phase ingestion: a document version's chunks commit first (keyword search, pages and
-- outline work at once) and their vectors follow. `vectors_pending` counts the chunks of the
-- current version that have no vector in the collection's active embedding set; every
-- writer keeps it exact in the transaction that changes the chunks or their vectors, so a
-- run that died between the phases is resumed from this column alone.
ALTER TABLE pgrag.documents ADD COLUMN vectors_pending int NOT NULL DEFAULT 0
    CHECK (vectors_pending >= 0);
CREATE INDEX documents_vectors_pending_idx ON pgrag.documents (collection_id)
    WHERE vectors_pending > 0;
