-- A chunk's document context: a short description of the document it belongs to (its lead
-- sentence, a deck's title slide...), built at ingestion from the document's own text. It
-- is kept apart from `content`, so snippets, offsets and pages stay the original text, and
-- enters the chunk's tsvector with the heading's weight (A: next to every word of the body)
-- as well as the text the model embeds. NULL (chunks written before): indexed as before.
ALTER TABLE pgrag.chunks ADD COLUMN context text;

CREATE FUNCTION pgrag.chunk_tsv(heading text, context text, content text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT pgrag.chunk_tsv(concat_ws(' ', heading, context), content)
$$;

-- a generated column's expression cannot change before PostgreSQL 17: replace the column
DROP INDEX pgrag.chunks_tsv_idx;
ALTER TABLE pgrag.chunks DROP COLUMN tsv;
ALTER TABLE pgrag.chunks ADD COLUMN tsv tsvector
    GENERATED ALWAYS AS (pgrag.chunk_tsv(heading, context, content)) STORED;
CREATE INDEX chunks_tsv_idx ON pgrag.chunks USING gin (tsv);
