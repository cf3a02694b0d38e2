\set ECHO none
-- Ten chunks in three documents of one collection, with 3-dimension vectors: the corpus of
-- the BM25 and fusion regression tests. Quiet: only the tests' own statements are echoed.
SET client_min_messages = warning;
INSERT INTO pgrag.collections (name) VALUES ('regress');
INSERT INTO pgrag.embedding_sets (collection_id, model, dimensions, state)
SELECT id, 'regress/3', 3, 'active' FROM pgrag.collections;
UPDATE pgrag.collections c SET active_set_id = es.id
FROM pgrag.embedding_sets es WHERE es.collection_id = c.id;
SELECT pgrag.ensure_embedding_index(id) IS NOT NULL AS indexed FROM pgrag.embedding_sets \g /dev/null
INSERT INTO pgrag.documents (id, collection_id, path, name, file_type, status)
SELECT d.id::uuid, c.id, d.name, d.name, 'md', 'ready'
FROM pgrag.collections c,
     (VALUES ('00000000-0000-0000-0000-000000000001', 'tea.md'),
             ('00000000-0000-0000-0000-000000000002', 'coffee.md'),
             ('00000000-0000-0000-0000-000000000003', 'garden.md')) d(id, name);
INSERT INTO pgrag.chunks (document_id, collection_id, ordinal, heading, content, content_hash,
                          token_count, char_start, char_end)
SELECT ('00000000-0000-0000-0000-00000000000' || x.doc)::uuid, c.id, x.ordinal, x.heading,
       x.content, sha256(convert_to(x.content, 'UTF8')), 10, 0, length(x.content)
FROM pgrag.collections c, (VALUES
    (1, 1, 'Tea', 'Green tea is brewed with water below boiling.'),
    (1, 2, 'Tea', 'Black tea, tea and more tea: strong tea with milk.'),
    (1, 3, 'Tea', 'Oolong is partly oxidised; brew it twice.'),
    (2, 4, 'Coffee', 'Espresso forces hot water through finely ground coffee.'),
    (2, 5, 'Coffee', 'Coffee and tea both contain caffeine.'),
    (2, 6, 'Coffee', 'Roasting beans slowly in a drum until the beans crack and the coffee '
                     'smells of caramel, smoke and boiling sugar.'),
    (3, 7, 'Garden', 'Water the tomatoes every morning.'),
    (3, 8, 'Garden', 'Mint grows fast; mint tea is fresh.'),
    (3, 9, 'Garden', 'Compost feeds the soil.'),
    (3, 10, 'Garden', 'Boiling water kills the weeds between paving stones.')
) x(doc, ordinal, heading, content);
-- vectors: tea leans on the first axis, coffee on the second, the garden on the third
INSERT INTO pgrag.embeddings (set_id, chunk_id, embedding)
SELECT es.id, c.id, v.embedding::vector
FROM pgrag.embedding_sets es, pgrag.chunks c
JOIN (VALUES (1, '[1,0,0]'), (2, '[0.9,0.3,0]'), (3, '[0.8,0,0.2]'), (4, '[0.1,1,0]'),
             (5, '[0.6,0.6,0]'), (6, '[0,1,0.1]'), (7, '[0,0.2,1]'), (8, '[0.5,0,0.8]'),
             (9, '[0,0,1]'), (10, '[0.2,0.1,0.9]')) v(ordinal, embedding)
  ON v.ordinal = c.ordinal;
RESET client_min_messages;
\set ECHO all
