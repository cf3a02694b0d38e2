-- The rerank stage in the search log: which model reordered the fused candidates, how that
-- went, what it cost, and each candidate's figures, so that pgrag.explain_search shows the
-- final order next to the fused one it replays.
--   rerank_model   NULL: no rerank was asked for (off, rerank=false, regex, past the top N)
--   rerank_outcome ok | timeout | error | malformed | partial (not ok: the fused order stood)
--   rerank         [{chunk_id, fused_rank, rerank_rank, rerank_score}] for the candidates
--                  reranked; NULL unless the outcome is ok
--   rerank_cost    what litellm priced the call at (USD), NULL when it could not
ALTER TABLE pgrag.search_log
    ADD COLUMN rerank_model text,
    ADD COLUMN rerank_outcome text,
    ADD COLUMN rerank jsonb,
    ADD COLUMN rerank_cost float8;
