-- The score parts an explained search computed (pgrag.fused_parts of each hit), logged with
-- it: the console's chart and pgrag.explain_parts read them instead of replaying the search.
-- NULL for searches without explain and for rows logged before this column existed.
ALTER TABLE pgrag.search_log ADD COLUMN score_parts jsonb;
