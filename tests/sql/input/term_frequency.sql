-- BM25 needs each query term's frequency in a chunk, and PostgreSQL keeps positions, not
-- counts: pgrag.term_frequency recovers it from ts_rank with unit weights, which for a term
-- occurring tf times is sum(1/i^2, i = 1..tf) / (pi^2/6).
-- The constant is pi^2/6:
SELECT pgrag.ts_rank_scale() = pi() ^ 2 / 6 AS is_pi_squared_over_six;
-- A term occurring 1 to 5 times: about tf (the inversion's bias shrinks as tf grows).
SELECT n AS occurrences,
       ts_rank('{1,1,1,1}', pgrag.chunk_tsv(NULL, rtrim(repeat('kiwi ', n))), 'kiwi') AS rank,
       round(pgrag.term_frequency(
           ts_rank('{1,1,1,1}', pgrag.chunk_tsv(NULL, rtrim(repeat('kiwi ', n))), 'kiwi')
       )::numeric, 4) AS tf
FROM generate_series(1, 5) AS n
ORDER BY n;
-- In a heading (weight A) as in the body: unit weights make the two alike.
SELECT round(pgrag.term_frequency(
           ts_rank('{1,1,1,1}', pgrag.chunk_tsv('kiwi kiwi', 'kiwi'), 'kiwi'))::numeric, 4)
       AS tf_of_three;
-- A term the chunk does not hold ranks 0 and is left out of the score (the inversion of 0
-- would give it about 0.1).
SELECT ts_rank('{1,1,1,1}', pgrag.chunk_tsv(NULL, 'kiwi'), 'mango') AS rank,
       round(pgrag.term_frequency(0)::numeric, 4) AS tf_of_rank_zero;
