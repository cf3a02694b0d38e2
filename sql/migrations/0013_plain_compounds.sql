-- A hyphenated word in a plain query ("IL-1", "pattern-recognition", "0-dimensional") is
-- OR-ed like every other term instead of becoming a phrase.
--
-- websearch_to_tsquery turns a compound into a phrase ('il' <-> '-1'); in an otherwise OR-ed
-- query that made the whole query a phrase query: BM25 candidates had to contain the exact
-- compound, most were dropped, and the fallback then scored up to 10 x pool_size more chunks
-- (20-30 ms instead of ~5 ms for one SciFact query in three). Quoted phrases and negations
-- keep websearch's semantics, as before. Measured with benchmarks/quality.py (SciFact
-- keyword/hybrid nDCG@10 and the CJK sets): see benchmarks/README.md.
CREATE OR REPLACE FUNCTION pgrag.lexical_query(q text) RETURNS tsquery
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    parsed tsquery := websearch_to_tsquery('pgrag.search', pgrag.lexical_text(q));
BEGIN
    IF position('"' IN q) = 0 AND position('!' IN parsed::text) = 0 THEN
        -- operators sit between quoted lexemes, so the pattern cannot match inside one
        RETURN regexp_replace(parsed::text, ' (&|<->|<[0-9]+>) ', ' | ', 'g')::tsquery;
    END IF;
    RETURN parsed;
END
$$;
