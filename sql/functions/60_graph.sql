-- Graph traversals and fuzzy node search (the `graph` toolset; tables in migration 0009:
-- labels and relationship types are checked against the server's allow-list).
--   SELECT * FROM pgrag.graph_find_path('<from uuid>', '<to uuid>', 4);
--   SELECT * FROM pgrag.graph_neighbors('<uuid>', 2, ARRAY['RELATED_TO']);
--   SELECT n.name, s.* FROM pgrag.graph_fuzzy_search('北京', NULL, 10) s
--     JOIN pgrag.graph_nodes n ON n.id = s.node_id;

-- One step from a node: every relationship of the allowed types in the allowed direction
-- ('out' follows from -> to, 'in' to -> from, 'both' either way), with the node reached.
CREATE OR REPLACE FUNCTION pgrag.graph_steps(node uuid, types text[], direction text)
RETURNS TABLE (relationship_id uuid, next_id uuid)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT r.id, r.to_id FROM pgrag.graph_relationships r
    WHERE r.from_id = node AND direction IN ('out', 'both')
      AND (types IS NULL OR r.type = ANY (types))
    UNION ALL
    SELECT r.id, r.from_id FROM pgrag.graph_relationships r
    WHERE r.to_id = node AND direction IN ('in', 'both')
      AND (types IS NULL OR r.type = ANY (types))
$$;

-- Every node within `depth` (capped at 3) relationships of a node: its distance (the start
-- node is included at distance 0), and the relationships leading to it from nodes nearer
-- than `depth` (every relationship the traversal follows; a cycle back to the start shows
-- up on the start node's row).
CREATE OR REPLACE FUNCTION pgrag.graph_neighbors(
    start_node uuid, depth int DEFAULT 1, types text[] DEFAULT NULL,
    direction text DEFAULT 'both')
RETURNS TABLE (node_id uuid, distance int, relationship_ids uuid[])
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    WITH RECURSIVE reach (node_id, distance) AS (
        SELECT n.id, 0 FROM pgrag.graph_nodes n WHERE n.id = start_node
        UNION
        SELECT s.next_id, r.distance + 1
        FROM reach r
        CROSS JOIN LATERAL pgrag.graph_steps(node => r.node_id, types => types,
                                             direction => direction) s
        WHERE r.distance < least(greatest(graph_neighbors.depth, 0), 3)
    ), nearest AS (
        SELECT r.node_id, min(r.distance)::int AS distance FROM reach r GROUP BY r.node_id
    ), followed AS (
        SELECT s.next_id AS node_id, s.relationship_id
        FROM nearest n
        CROSS JOIN LATERAL pgrag.graph_steps(node => n.node_id, types => types,
                                             direction => direction) s
        WHERE n.distance < least(greatest(graph_neighbors.depth, 0), 3)
    )
    SELECT n.node_id, n.distance,
           coalesce((SELECT array_agg(DISTINCT f.relationship_id ORDER BY f.relationship_id)
                     FROM followed f WHERE f.node_id = n.node_id), ARRAY[]::uuid[])
    FROM nearest n
    ORDER BY n.distance, n.node_id
$$;

-- The shortest path (fewest relationships) between two nodes, at most max_depth (capped at
-- 6) long. A breadth-first pass stops at the level where the target first appears (the
-- recursive CTE yields level after level, and LIMIT 1 stops pulling rows); a second pass
-- records which nodes are reachable in fewer steps; the walk back from the target then
-- picks, at every step, a node one step nearer to the start (the smallest id when several
-- are). Returns no row when there is no such path.
CREATE OR REPLACE FUNCTION pgrag.graph_find_path(
    from_node uuid, to_node uuid, max_depth int DEFAULT 4,
    types text[] DEFAULT NULL, direction text DEFAULT 'both')
RETURNS TABLE (depth int, node_ids uuid[], relationship_ids uuid[])
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    WITH RECURSIVE reach (node_id, distance) AS (
        SELECT n.id, 0 FROM pgrag.graph_nodes n WHERE n.id = from_node
        UNION
        SELECT s.next_id, r.distance + 1
        FROM reach r
        CROSS JOIN LATERAL pgrag.graph_steps(node => r.node_id, types => types,
                                             direction => direction) s
        WHERE r.distance < least(greatest(max_depth, 0), 6) AND r.node_id <> to_node
    ), target AS (
        SELECT r.distance FROM reach r WHERE r.node_id = to_node LIMIT 1
    ), nearer (node_id, distance) AS (
        SELECT n.id, 0 FROM pgrag.graph_nodes n, target t
        WHERE n.id = from_node AND t.distance > 0
        UNION
        SELECT s.next_id, r.distance + 1
        FROM nearer r
        CROSS JOIN LATERAL pgrag.graph_steps(node => r.node_id, types => types,
                                             direction => direction) s
        WHERE r.distance < (SELECT t.distance FROM target t) - 1
    ), back (node_id, distance, node_ids, relationship_ids) AS (
        SELECT to_node, t.distance, ARRAY[to_node], ARRAY[]::uuid[]
        FROM target t
        UNION ALL
        SELECT p.prev_id, b.distance - 1, p.prev_id || b.node_ids,
               p.relationship_id || b.relationship_ids
        FROM back b
        CROSS JOIN LATERAL (
            SELECT s.next_id AS prev_id, s.relationship_id
            FROM pgrag.graph_steps(node => b.node_id, types => types,
                                   direction => CASE direction WHEN 'out' THEN 'in'
                                                               WHEN 'in' THEN 'out'
                                                               ELSE 'both' END) s
            WHERE EXISTS (SELECT 1 FROM nearer r
                          WHERE r.node_id = s.next_id AND r.distance = b.distance - 1)
            ORDER BY s.next_id, s.relationship_id
            LIMIT 1
        ) p
        WHERE b.distance > 0
    )
    SELECT cardinality(b.relationship_ids), b.node_ids, b.relationship_ids
    FROM back b
    WHERE b.distance = 0
$$;

-- Fuzzy node search: pg_trgm similarity of the name (typos, Latin scripts) and a CJK-aware
-- lexical match (the bigrams of pgrag.lexical_text, so 北京 finds 北京大学): Dice overlap of
-- the query's lexemes with the name's, and the share of the query's lexemes found anywhere
-- in the node (name and string properties; half weight). score = the best of the three,
-- each in 0..1. A node qualifies with trigram similarity >= 0.3 or word similarity >= 0.6
-- (pg_trgm's default thresholds), a shared lexeme, or the query as a substring of its name.
-- Only a bounded pool of candidates is scored: the nearest names by trigram distance (GiST,
-- KNN), the best full-text matches (GIN on tsv) and the shortest names containing the query
-- (GIN trigram), so a word that many nodes share does not score every node.
CREATE OR REPLACE FUNCTION pgrag.graph_fuzzy_search(q text, labels text[] DEFAULT NULL, lim int DEFAULT 10)
RETURNS TABLE (node_id uuid, score real, trigram_score real, name_score real,
               text_score real)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    WITH query AS (
        SELECT coalesce(tsvector_to_array(to_tsvector('pgrag.search', pgrag.lexical_text(q))),
                        ARRAY[]::text[]) AS lexemes,
               '%' || replace(replace(replace(q, '\', '\\'), '%', '\%'), '_', '\_') || '%'
                   AS pattern,
               greatest(least(lim, 1000), 1) * 4 + 40 AS pool
    ), tsq AS (
        SELECT query.*,
               CASE WHEN cardinality(lexemes) = 0 THEN NULL
                    ELSE (SELECT string_agg(
                                     '''' || replace(replace(l, '\', '\\'), '''', '''''') || '''',
                                     ' | ')
                          FROM unnest(lexemes) AS l)::tsquery END AS any_lexeme
        FROM query
    ), candidates AS (
        (SELECT n.id FROM pgrag.graph_nodes n
         WHERE labels IS NULL OR n.label = ANY (labels)
         ORDER BY n.name <-> q LIMIT (SELECT pool FROM query))
        UNION
        (SELECT n.id FROM pgrag.graph_nodes n
         WHERE labels IS NULL OR n.label = ANY (labels)
         ORDER BY q <<-> n.name LIMIT (SELECT pool FROM query))
        UNION
        (SELECT n.id FROM pgrag.graph_nodes n, tsq
         WHERE tsq.any_lexeme IS NOT NULL AND n.tsv @@ tsq.any_lexeme
           AND (labels IS NULL OR n.label = ANY (labels))
         ORDER BY ts_rank(n.tsv, tsq.any_lexeme) DESC, n.id LIMIT (SELECT pool FROM query))
        UNION
        (SELECT n.id FROM pgrag.graph_nodes n, query
         WHERE n.name ILIKE query.pattern AND (labels IS NULL OR n.label = ANY (labels))
         ORDER BY length(n.name), n.id LIMIT (SELECT pool FROM query))
    ), scored AS (
        -- the name's lexemes are the tsv's weight-A ones: no re-tokenising per row
        SELECT n.id,
               similarity(n.name, q) AS sim,
               word_similarity(q, n.name) AS word_sim,
               n.name ILIKE tsq.pattern AS contains,
               tsvector_to_array(ts_filter(n.tsv, '{a}')) AS name_lexemes,
               tsvector_to_array(n.tsv) AS all_lexemes,
               tsq.lexemes AS query_lexemes
        FROM candidates c JOIN pgrag.graph_nodes n ON n.id = c.id, tsq
    ), measured AS (
        SELECT s.id, s.sim, s.word_sim, s.contains,
               greatest(s.sim, s.word_sim) AS trgm,
               CASE WHEN cardinality(s.query_lexemes) + cardinality(s.name_lexemes) = 0 THEN 0
                    ELSE 2.0 * (SELECT count(*) FROM unnest(s.query_lexemes) AS l
                                WHERE l = ANY (s.name_lexemes))
                         / (cardinality(s.query_lexemes) + cardinality(s.name_lexemes)) END
                   AS name_lex,
               CASE WHEN cardinality(s.query_lexemes) = 0 THEN 0
                    ELSE 1.0 * (SELECT count(*) FROM unnest(s.query_lexemes) AS l
                                WHERE l = ANY (s.all_lexemes))
                         / cardinality(s.query_lexemes) END AS text_lex
        FROM scored s
    )
    SELECT m.id,
           greatest(m.trgm, m.name_lex, 0.5 * m.text_lex)::real,
           m.trgm::real, m.name_lex::real, m.text_lex::real
    FROM measured m
    WHERE m.sim >= 0.3 OR m.word_sim >= 0.6 OR m.contains OR m.text_lex > 0
    ORDER BY 2 DESC, m.id
    LIMIT greatest(lim, 0)
$$;

-- Unlink the graph from documents about to be deleted (p_documents) or from their chunks
-- only (a new version replaces them): what the foreign keys `graph_nodes.document_id` and
-- `chunk_id` ... ON DELETE SET NULL (migration 0009) do on a single server. On Citus the
-- graph stays a local table on the coordinator and those keys are dropped at distribution,
-- so the writer calls this before its DELETE, in the same transaction; with the keys in
-- place it does nothing. The chunk ids are read first (one routed query on the
-- collection's shard), then the local graph is updated: no local/distributed join.
CREATE OR REPLACE FUNCTION pgrag.unlink_graph(
    p_collection_id bigint, p_document_ids uuid[], p_documents boolean
) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    chunk_ids bigint[];
BEGIN
    IF EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'pgrag.graph_nodes'::regclass
               AND conname = 'graph_nodes_chunk_id_fkey') THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pgrag.graph_nodes
                   WHERE document_id = ANY (p_document_ids) OR chunk_id IS NOT NULL) THEN
        RETURN;  -- no link to these documents or to any chunk: skip the shard query
    END IF;
    SELECT array_agg(c.id) INTO chunk_ids FROM pgrag.chunks c
    WHERE c.collection_id = p_collection_id AND c.document_id = ANY (p_document_ids);
    UPDATE pgrag.graph_nodes SET chunk_id = NULL WHERE chunk_id = ANY (chunk_ids);
    IF p_documents THEN
        UPDATE pgrag.graph_nodes SET document_id = NULL WHERE document_id = ANY (p_document_ids);
    END IF;
END
$$;
