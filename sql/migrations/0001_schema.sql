-- pgrag schema v1: collections, documents and their structure, chunks, embeddings by model.
-- Applied once by `pgrag migrate` (recorded in pgrag.schema_migrations). Migrations hold
-- DDL and the functions generated columns depend on; every other function is defined once
-- in sql/functions/ (re-applied whenever those files change).

CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE SCHEMA IF NOT EXISTS pgrag;

-- A knowledge base. Bound to one embedding model at a time: the active embedding set.
CREATE TABLE pgrag.collections (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200),
    active_set_id   bigint,
    settings        jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- One set of embeddings of a collection's chunks by one model. A collection can hold a
-- `building` set (re-embedding online) next to its `active` one and switch atomically.
CREATE TABLE pgrag.embedding_sets (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    collection_id   bigint NOT NULL REFERENCES pgrag.collections (id) ON DELETE CASCADE,
    model           text NOT NULL,
    dimensions      int NOT NULL CHECK (dimensions BETWEEN 1 AND 16000),
    state           text NOT NULL DEFAULT 'building'
                    CHECK (state IN ('building', 'active', 'retired')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (collection_id, model)
);

ALTER TABLE pgrag.collections
    ADD CONSTRAINT collections_active_set_fk FOREIGN KEY (active_set_id)
    REFERENCES pgrag.embedding_sets (id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;

CREATE TABLE pgrag.documents (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    collection_id   bigint NOT NULL REFERENCES pgrag.collections (id) ON DELETE CASCADE,
    path            text NOT NULL,          -- relative to the ingested root, '/' separated
    folder          text NOT NULL DEFAULT '',
    name            text NOT NULL,
    file_type       text NOT NULL,          -- extension without dot: pdf, docx, xlsx, md...
    source          text NOT NULL DEFAULT 'file' CHECK (source IN ('file', 'saved')),
    size_bytes      bigint,
    content_hash    text,
    title           text,
    author          text,
    submitter       text,
    created_at      timestamptz,            -- as reported by the file (or its filesystem)
    modified_at     timestamptz,
    ingested_at     timestamptz,
    updated_at      timestamptz NOT NULL DEFAULT now(),
    tags            text[] NOT NULL DEFAULT '{}',
    metadata        jsonb NOT NULL DEFAULT '{}'::jsonb,
    outline         jsonb,                  -- cached outline: never re-parse to answer it
    status          text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'processing', 'ready', 'failed')),
    progress        real NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
    error_code      text,
    error_detail    text,
    UNIQUE (collection_id, path)
);
CREATE INDEX documents_folder_idx ON pgrag.documents (collection_id, folder text_pattern_ops);
CREATE INDEX documents_name_idx ON pgrag.documents (collection_id, name);
CREATE INDEX documents_status_idx ON pgrag.documents (status);
CREATE INDEX documents_tags_idx ON pgrag.documents USING gin (tags);

-- Structural units: pages, sheets, slides, sections (or one `text` unit). `body` is the
-- extracted text of the unit; chunk offsets point into it.
CREATE TABLE pgrag.units (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    document_id     uuid NOT NULL REFERENCES pgrag.documents (id) ON DELETE CASCADE,
    kind            text NOT NULL CHECK (kind IN ('page', 'sheet', 'slide', 'section', 'text')),
    number          int NOT NULL,           -- 1-based page/sheet/slide/section number
    title           text,                   -- sheet name, slide title, section heading
    body            text NOT NULL DEFAULT '',
    meta            jsonb NOT NULL DEFAULT '{}'::jsonb,  -- notes, rows/columns, header, level
    UNIQUE (document_id, kind, number)
);

-- Sheet rows keep cells addressable by A1 ranges without re-reading the workbook.
CREATE TABLE pgrag.sheet_rows (
    unit_id         bigint NOT NULL REFERENCES pgrag.units (id) ON DELETE CASCADE,
    row_number      int NOT NULL,           -- 1-based, as in the spreadsheet
    cells           text[] NOT NULL,
    PRIMARY KEY (unit_id, row_number)
);

-- CJK-aware lexical form, applied identically at index and query time: NFKC, lower case,
-- CJK punctuation to spaces, every CJK run replaced by its overlapping bigrams.
CREATE FUNCTION pgrag.cjk_bigrams(run text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN length(run) < 2 THEN run
           ELSE (SELECT string_agg(substr(run, i, 2), ' ' ORDER BY i)
                 FROM generate_series(1, length(run) - 1) AS i) END
$$;

CREATE FUNCTION pgrag.lexical_text(t text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(string_agg(
               CASE WHEN m[1] ~ '^[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]'
                    THEN pgrag.cjk_bigrams(m[1]) ELSE m[1] END, ' ' ORDER BY n), '')
    FROM regexp_matches(
             regexp_replace(lower(normalize(t, NFKC)), '[\u3000-\u303f\uff00-\uff65]', ' ', 'g'),
             '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+|[^\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+',
             'g') WITH ORDINALITY AS r(m, n)
$$;

-- English stemming and stop words for Latin text; CJK bigrams pass through unchanged.
CREATE TEXT SEARCH CONFIGURATION pgrag.search (COPY = pg_catalog.english);

-- The indexed expression: headings weigh more (A) than body text (D).
CREATE FUNCTION pgrag.chunk_tsv(heading text, content text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT setweight(to_tsvector('pgrag.search', pgrag.lexical_text(coalesce(heading, ''))), 'A')
        || setweight(to_tsvector('pgrag.search', pgrag.lexical_text(coalesce(content, ''))), 'D')
$$;

CREATE TABLE pgrag.chunks (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    document_id     uuid NOT NULL REFERENCES pgrag.documents (id) ON DELETE CASCADE,
    collection_id   bigint NOT NULL REFERENCES pgrag.collections (id) ON DELETE CASCADE,
    unit_id         bigint REFERENCES pgrag.units (id) ON DELETE CASCADE,
    ordinal         int NOT NULL,           -- order within the document
    heading         text,                   -- document title / section path, weighted A
    content         text NOT NULL,
    content_hash    bytea NOT NULL,         -- sha256 of content: the embedding cache key
    token_count     int NOT NULL,
    char_start      int NOT NULL,           -- offsets into the unit's body
    char_end        int NOT NULL,
    page            int,
    section         text,
    sheet           text,
    row_start       int,
    row_end         int,
    slide           int,
    tsv             tsvector GENERATED ALWAYS AS (pgrag.chunk_tsv(heading, content)) STORED,
    UNIQUE (document_id, ordinal),
    CHECK (char_end >= char_start)
);
CREATE INDEX chunks_tsv_idx ON pgrag.chunks USING gin (tsv);
CREATE INDEX chunks_document_idx ON pgrag.chunks (document_id);
CREATE INDEX chunks_collection_idx ON pgrag.chunks (collection_id);

-- Embeddings of chunks, one row per (embedding set, chunk). The column is untyped so that
-- sets of any dimension share the table; each set gets its own partial HNSW index on the
-- typed expression (see pgrag.ensure_embedding_index).
CREATE TABLE pgrag.embeddings (
    set_id          bigint NOT NULL REFERENCES pgrag.embedding_sets (id) ON DELETE CASCADE,
    chunk_id        bigint NOT NULL REFERENCES pgrag.chunks (id) ON DELETE CASCADE,
    embedding       vector NOT NULL,
    PRIMARY KEY (set_id, chunk_id)
);
CREATE INDEX embeddings_chunk_idx ON pgrag.embeddings (chunk_id);

-- Passage embeddings by (model, sha256 of text): re-ingestion never re-embeds known text.
CREATE TABLE pgrag.embedding_cache (
    model           text NOT NULL,
    content_hash    bytea NOT NULL,
    embedding       vector NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (model, content_hash)
);
