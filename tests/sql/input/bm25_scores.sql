-- BM25 over a ten-chunk corpus: the parts, the lexical pool, and the pool recomputed from
-- the formula in sql/functions/20_lexical.sql.
\i setup/ten_chunks.sql
-- The defaults the lexical leg ranks with.
SELECT bm25_k1, bm25_b, candidate_budget, rescore_size, proximity_width
FROM pgrag.fusion_defaults();
-- idf of a term found in df of 10 chunks (a df above N counts as N: never negative).
SELECT df, round(pgrag.bm25_idf(10, df)::numeric, 6) AS idf
FROM (VALUES (0), (1), (5), (10), (12)) AS v(df)
ORDER BY df;
-- One term's part: more occurrences saturate (k1), longer chunks weigh less (b).
SELECT tf, doc_len,
       round(pgrag.bm25_score(tf, 1.0, doc_len, 10, d.bm25_k1, d.bm25_b)::numeric, 6) AS score
FROM (VALUES (1, 10), (2, 10), (4, 10), (1, 5), (1, 20)) AS v(tf, doc_len),
     pgrag.fusion_defaults() d
ORDER BY tf, doc_len;
-- The lexical pool of a query.
SELECT c.ordinal, d.name, l.rank, round(l.score::numeric, 6) AS score,
       round(l.coverage::numeric, 6) AS coverage, round(l.proximity::numeric, 6) AS proximity
FROM pgrag.lexical_candidates('boiling water for tea') l
JOIN pgrag.chunks c ON c.id = l.chunk_id
JOIN pgrag.documents d ON d.id = c.document_id
ORDER BY l.rank;
-- The same scores from the formula: idf over the 10 chunks, tf from ts_rank, the length
-- in distinct lexemes against the mean over the matching chunks.
WITH terms AS (
    SELECT t.term, pgrag.bm25_idf(10, (SELECT count(*) FROM pgrag.chunks c
                                       WHERE c.tsv @@ t.term)) AS idf
    FROM pgrag.query_terms(pgrag.lexical_query('boiling water for tea')) t
),
matching AS (
    SELECT c.id, c.ordinal, c.tsv FROM pgrag.chunks c
    WHERE c.tsv @@ pgrag.lexical_query('boiling water for tea')
),
formula AS (
    SELECT m.id, sum(pgrag.bm25_score(pgrag.term_frequency(ts_rank('{1,1,1,1}', m.tsv, t.term)),
                                      t.idf, length(m.tsv),
                                      (SELECT avg(length(x.tsv)) FROM matching x),
                                      d.bm25_k1, d.bm25_b))
                     FILTER (WHERE m.tsv @@ t.term) AS score
    FROM matching m CROSS JOIN terms t CROSS JOIN pgrag.fusion_defaults() d
    GROUP BY m.id
)
SELECT m.ordinal, abs(l.score - f.score) < 1e-12 AS same_score
FROM pgrag.lexical_candidates('boiling water for tea') l
JOIN formula f ON f.id = l.chunk_id
JOIN matching m ON m.id = l.chunk_id
ORDER BY l.rank;
-- k1 and b named by the caller instead of the defaults: the order of the pool changes.
SELECT c.ordinal, l.rank, round(l.score::numeric, 6) AS score
FROM pgrag.lexical_candidates('boiling water for tea',
                              opts => pgrag.ranking_options(bm25_k1 => 2.0, bm25_b => 1.0)) l
JOIN pgrag.chunks c ON c.id = l.chunk_id
ORDER BY l.rank;
-- A phrase: only chunks holding the words next to each other.
SELECT c.ordinal, l.rank, round(l.score::numeric, 6) AS score
FROM pgrag.lexical_candidates('"boiling water"') l
JOIN pgrag.chunks c ON c.id = l.chunk_id
ORDER BY l.rank;
-- A negation: chunks holding "tea" are left out.
SELECT c.ordinal, l.rank
FROM pgrag.lexical_candidates('water -tea') l
JOIN pgrag.chunks c ON c.id = l.chunk_id
ORDER BY l.rank;
-- Proximity: of a document's chunks in the pool, the one holding its matched words closest
-- together gets 1. Chunk 6 holds "roasting" 12 positions before "coffee" and "caramel" (the
-- heading "Coffee" stands next to every word): no window of 10 positions holds all three.
SELECT c.ordinal, l.rank, round(l.proximity::numeric, 6) AS proximity
FROM pgrag.lexical_candidates('roasting coffee caramel') l
JOIN pgrag.chunks c ON c.id = l.chunk_id
ORDER BY l.rank;
