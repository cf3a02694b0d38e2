-- The fusion of the two legs on a fixed pool (the ten chunks with their vectors), in both
-- modes, and each fused score recomputed from the terms hybrid_fusion shows.
\i setup/ten_chunks.sql
SELECT fusion, rrf_k, lexical_weight, semantic_weight, pool_size, coverage_gain,
       max_lexical_share, proximity_weight
FROM pgrag.fusion_defaults();
-- adaptive: share = least(max_lexical_share, coverage_gain * coverage of the top lexical
-- chunk); fused = share * lexical_norm + (1 - share) * semantic_norm.
SELECT c.ordinal, f.lexical_rank, round(f.lexical_norm::numeric, 6) AS lexical_norm,
       f.semantic_rank, round(f.semantic_norm::numeric, 6) AS semantic_norm,
       round(f.lexical_share::numeric, 6) AS share, round(f.fused_score::numeric, 6) AS fused
FROM pgrag.hybrid_fusion('boiling water for tea', '[1,0,0.1]'::vector) f
JOIN pgrag.chunks c ON c.id = f.chunk_id
ORDER BY f.fused_score DESC, c.ordinal;
SELECT bool_and(abs(f.fused_score - (f.lexical_share * coalesce(f.lexical_norm, 0)
                                     + (1 - f.lexical_share) * coalesce(f.semantic_norm, 0)))
                < 1e-12) AS adaptive_formula_holds
FROM pgrag.hybrid_fusion('boiling water for tea', '[1,0,0.1]'::vector) f;
-- rrf: fused = lexical_weight / (rrf_k + lexical_rank) + semantic_weight / (rrf_k + semantic_rank).
SELECT c.ordinal, f.lexical_rank, f.semantic_rank, round(f.fused_score::numeric, 6) AS fused
FROM pgrag.hybrid_fusion('boiling water for tea', '[1,0,0.1]'::vector,
                         opts => pgrag.ranking_options(fusion => 'rrf', rrf_k => 10)) f
JOIN pgrag.chunks c ON c.id = f.chunk_id
ORDER BY f.fused_score DESC, c.ordinal;
-- A query the best lexical chunk covers in part: the share is coverage_gain x its coverage.
SELECT DISTINCT round(f.lexical_share::numeric, 6) AS share,
       round((d.coverage_gain * (SELECT l.coverage FROM pgrag.lexical_candidates('tea and mango') l
                                 WHERE l.rank = 1))::numeric, 6) AS gain_times_coverage
FROM pgrag.hybrid_fusion('tea and mango', '[1,0,0.1]'::vector) f, pgrag.fusion_defaults() d;
-- Without the semantic leg the share is 1; without the lexical leg it is 0.
SELECT DISTINCT f.lexical_share
FROM pgrag.hybrid_fusion('boiling water for tea', NULL) f;
SELECT DISTINCT f.lexical_share
FROM pgrag.hybrid_fusion(NULL, '[1,0,0.1]'::vector) f;
-- The ranked page: hybrid_search orders the fused pool.
SELECT h.rank, c.ordinal, round(h.fused_score::numeric, 6) AS fused, h.total_candidates
FROM pgrag.hybrid_search('boiling water for tea', '[1,0,0.1]'::vector, 5) h
JOIN pgrag.chunks c ON c.id = h.chunk_id
ORDER BY h.rank;
-- An unknown fusion is refused.
SELECT count(*) FROM pgrag.hybrid_fusion('tea', NULL, opts => pgrag.ranking_options(fusion => 'max'));
