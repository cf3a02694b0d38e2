-- Languages: each chunk's language and, per embedding set, each language's mean vector.
--
-- A multilingual model places every text near its language's region of the space, so in a
-- mixed collection a same-language passage about the wrong thing outranks the
-- other-language passage that answers (xquad-mixed, cross-lingual nDCG@10: 0.10). The
-- semantic leg (sql/functions/30_semantic.sql) therefore compares vectors with their
-- language's mean subtracted; this migration keeps what it needs: the language of every
-- chunk (detected at ingestion; NULL until detected, `und` when a chunk has no words) and
-- running sums per (embedding set, language) of each document's mean vector, so means
-- follow inserts and deletes exactly without re-embedding anything, and one document with
-- thousands of sheet rows weighs as much as a one-page memo.

ALTER TABLE pgrag.chunks ADD COLUMN lang text;

-- The chunk's language and document, copied on insert: the per-language semantic scans
-- and the sums need no join, and a delete (cascading from chunks) still knows them.
ALTER TABLE pgrag.embeddings ADD COLUMN lang text NOT NULL DEFAULT 'und';
ALTER TABLE pgrag.embeddings ADD COLUMN document_id uuid;

-- One row per statement that inserted (> 0) or deleted (< 0) vectors of a set and
-- language: its chunks (n), its documents and the sum of their per-document mean vectors
-- (a document version's chunks are written and deleted by one statement). Appends never
-- wait on each other (no hot row, no deadlock between ingesters);
-- pgrag.compact_language_sums() folds them into one row per set and language.
CREATE TABLE pgrag.language_sums (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    set_id    bigint NOT NULL,  -- no foreign key: a set's own deletion cascades here first
    lang      text NOT NULL,
    n         bigint NOT NULL,
    documents bigint NOT NULL,
    total     vector NOT NULL
);
CREATE INDEX language_sums_set_idx ON pgrag.language_sums (set_id, lang);

CREATE FUNCTION pgrag.embedding_lang() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT coalesce(c.lang, 'und'), c.document_id INTO NEW.lang, NEW.document_id
    FROM pgrag.chunks c WHERE c.id = NEW.chunk_id;
    NEW.lang := coalesce(NEW.lang, 'und');
    RETURN NEW;
END
$$;
CREATE TRIGGER embeddings_lang BEFORE INSERT ON pgrag.embeddings
    FOR EACH ROW EXECUTE FUNCTION pgrag.embedding_lang();

CREATE FUNCTION pgrag.language_sums_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgrag.language_sums (set_id, lang, n, documents, total)
    SELECT d.set_id, d.lang, sum(d.n), count(*), sum(d.mean)
    FROM (SELECT r.set_id, r.lang, count(*) AS n, avg(r.embedding) AS mean
          FROM added r GROUP BY r.set_id, r.lang, r.document_id) d
    GROUP BY d.set_id, d.lang;
    RETURN NULL;
END
$$;
CREATE TRIGGER embeddings_sums_added AFTER INSERT ON pgrag.embeddings
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION pgrag.language_sums_added();

CREATE FUNCTION pgrag.language_sums_removed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgrag.language_sums (set_id, lang, n, documents, total)
    SELECT d.set_id, d.lang, -sum(d.n), -count(*), pgrag.vector_negate(sum(d.mean))
    FROM (SELECT r.set_id, r.lang, count(*) AS n, avg(r.embedding) AS mean
          FROM removed r
          WHERE EXISTS (SELECT 1 FROM pgrag.embedding_sets es WHERE es.id = r.set_id)
          GROUP BY r.set_id, r.lang, r.document_id) d
    GROUP BY d.set_id, d.lang;
    RETURN NULL;
END
$$;
CREATE TRIGGER embeddings_sums_removed AFTER DELETE ON pgrag.embeddings
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
    EXECUTE FUNCTION pgrag.language_sums_removed();

-- -v (pgvector has no scalar product); used by the trigger above, so defined here.
CREATE FUNCTION pgrag.vector_negate(v vector) RETURNS vector
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT array_fill(0::real, ARRAY[vector_dims(v)])::vector - v
$$;

-- Existing vectors: their documents, then their sums (chunks get their language from
-- `pgrag migrate`, which then calls pgrag.recount_language_sums for the sets it touched).
UPDATE pgrag.embeddings e SET document_id = c.document_id
FROM pgrag.chunks c WHERE c.id = e.chunk_id;
INSERT INTO pgrag.language_sums (set_id, lang, n, documents, total)
SELECT d.set_id, d.lang, sum(d.n), count(*), sum(d.mean)
FROM (SELECT e.set_id, e.lang, count(*) AS n, avg(e.embedding) AS mean
      FROM pgrag.embeddings e GROUP BY e.set_id, e.lang, e.document_id) d
GROUP BY d.set_id, d.lang;

ALTER TABLE pgrag.language_sums ENABLE ROW LEVEL SECURITY;
CREATE POLICY scoped ON pgrag.language_sums FOR SELECT TO PUBLIC
    USING (EXISTS (SELECT 1 FROM pgrag.embedding_sets es WHERE es.id = set_id));
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pgrag_scoped') THEN
        GRANT SELECT ON pgrag.language_sums TO pgrag_scoped;
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'pgrag: cannot grant to pgrag_scoped';
END
$$;
