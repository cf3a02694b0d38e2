-- A document's language, derived from its chunks' (documents have no language of their
-- own): the language of more than half of its chunks whose language is known, else
-- 'mixed'; no row for a document without such chunks. `document_ids` NULL: every document
-- the caller can see (row-level security applies).
--   SELECT * FROM pgrag.document_languages() WHERE language = 'mixed';
CREATE OR REPLACE FUNCTION pgrag.document_languages(document_ids uuid[] DEFAULT NULL)
RETURNS TABLE (document_id uuid, language text)
LANGUAGE sql STABLE AS $$
    SELECT l.document_id,
           CASE WHEN max(l.n) * 2 > sum(l.n)
                THEN (array_agg(l.lang ORDER BY l.n DESC, l.lang))[1]
                ELSE 'mixed' END
    FROM (SELECT c.document_id, c.lang, count(*) AS n
          FROM pgrag.chunks c
          WHERE (document_languages.document_ids IS NULL
                 OR c.document_id = ANY(document_languages.document_ids))
            AND c.lang <> 'und'
          GROUP BY c.document_id, c.lang) l
    GROUP BY l.document_id
$$;
