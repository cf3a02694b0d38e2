-- Graph store (seed 002 §2; SPEC §5.3 toolset `graph`): nodes and typed relationships in
-- plain tables, traversals as recursive CTEs, fuzzy search as pg_trgm + CJK-aware full text.
-- Labels and relationship types are checked against an allow-list by the server
-- (PGRAG_GRAPH_LABELS / PGRAG_GRAPH_RELATIONSHIP_TYPES); the CHECKs below only keep the
-- identifiers well-formed. Everything here can be called from psql, e.g.
--   SELECT * FROM pgrag.graph_find_path('<from uuid>', '<to uuid>', 4);
--   SELECT * FROM pgrag.graph_neighbors('<uuid>', 2, ARRAY['RELATED_TO']);
--   SELECT n.name, s.* FROM pgrag.graph_fuzzy_search('北京', NULL, 10) s
--     JOIN pgrag.graph_nodes n ON n.id = s.node_id;

-- Every string value inside a properties document (any depth), for the full-text index.
CREATE FUNCTION pgrag.graph_properties_text(properties jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(string_agg(v #>> '{}', ' '), '')
    FROM jsonb_path_query(coalesce(properties, '{}'::jsonb),
                          'strict $.** ? (@.type() == "string")') AS v
$$;

CREATE TABLE pgrag.graph_nodes (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    label           text NOT NULL CHECK (label ~ '^[A-Za-z][A-Za-z0-9_]{0,62}$'),
    name            text NOT NULL CHECK (length(name) BETWEEN 1 AND 1000),
    properties      jsonb NOT NULL DEFAULT '{}'::jsonb
                    CHECK (jsonb_typeof(properties) = 'object'),
    document_id     uuid REFERENCES pgrag.documents (id) ON DELETE SET NULL,
    chunk_id        bigint REFERENCES pgrag.chunks (id) ON DELETE SET NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    -- the name weighs A, string property values D: the same expression as chunks.tsv
    tsv             tsvector GENERATED ALWAYS AS
                    (pgrag.chunk_tsv(name, pgrag.graph_properties_text(properties))) STORED
);
CREATE INDEX graph_nodes_label_name_idx ON pgrag.graph_nodes (label, name);
-- trigram indexes on the name: GIN finds substrings (ILIKE), GiST orders by similarity (KNN)
CREATE INDEX graph_nodes_name_trgm_idx ON pgrag.graph_nodes USING gin (name gin_trgm_ops);
CREATE INDEX graph_nodes_name_knn_idx ON pgrag.graph_nodes USING gist (name gist_trgm_ops);
CREATE INDEX graph_nodes_tsv_idx ON pgrag.graph_nodes USING gin (tsv);
CREATE INDEX graph_nodes_properties_idx ON pgrag.graph_nodes USING gin (properties jsonb_path_ops);
CREATE INDEX graph_nodes_document_idx ON pgrag.graph_nodes (document_id);
CREATE INDEX graph_nodes_chunk_idx ON pgrag.graph_nodes (chunk_id);

-- Deleting a node removes its relationships (DETACH); the server refuses a plain delete of
-- a node that still has relationships, under a row lock, so nothing is removed by surprise.
CREATE TABLE pgrag.graph_relationships (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    type            text NOT NULL CHECK (type ~ '^[A-Za-z][A-Za-z0-9_]{0,62}$'),
    from_id         uuid NOT NULL REFERENCES pgrag.graph_nodes (id) ON DELETE CASCADE,
    to_id           uuid NOT NULL REFERENCES pgrag.graph_nodes (id) ON DELETE CASCADE,
    properties      jsonb NOT NULL DEFAULT '{}'::jsonb
                    CHECK (jsonb_typeof(properties) = 'object'),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX graph_relationships_from_idx ON pgrag.graph_relationships (from_id, type);
CREATE INDEX graph_relationships_to_idx ON pgrag.graph_relationships (to_id, type);
CREATE INDEX graph_relationships_type_idx ON pgrag.graph_relationships (type);
