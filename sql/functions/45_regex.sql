-- Regex mode.

-- Regex mode: POSIX regular expression over chunk text (case-insensitive unless asked).
-- Callers run it under a statement_timeout; an invalid pattern raises SQLSTATE 2201B.
-- Order: most matches first, then document path and position, so pages are stable.
CREATE OR REPLACE FUNCTION pgrag.regex_search(
    pattern         text,
    match_count     int DEFAULT 10,
    collection_ids  bigint[] DEFAULT NULL,
    filters         jsonb DEFAULT '{}'::jsonb,
    match_offset    int DEFAULT 0,
    case_sensitive  boolean DEFAULT false
) RETURNS TABLE (rank int, chunk_id bigint, document_id uuid, matches int, total_candidates int)
LANGUAGE sql STABLE AS $$
    WITH hits AS (
        SELECT c.id, c.document_id, d.path, c.ordinal,
               (SELECT count(*) FROM regexp_matches(c.content, pattern,
                                                    CASE WHEN case_sensitive THEN 'g' ELSE 'gi' END))::int AS n
        FROM pgrag.chunks c
        JOIN pgrag.documents d ON d.id = c.document_id AND d.collection_id = c.collection_id
        WHERE (CASE WHEN case_sensitive THEN c.content ~ pattern ELSE c.content ~* pattern END)
          AND c.disabled_at IS NULL  -- disabled by hand (migration 0032)
          AND (collection_ids IS NULL OR c.collection_id = ANY (collection_ids))
          AND pgrag.document_fields_match(
                  folder => d.folder, file_type => d.file_type, id => d.id,
                  modified_at => d.modified_at, created_at => d.created_at,
                  submitter => d.submitter, author => d.author, tags => d.tags, filters => filters,
                  metadata => d.metadata)
    )
    SELECT row_number() OVER (ORDER BY h.n DESC, h.path, h.ordinal)::int, h.id, h.document_id,
           h.n, count(*) OVER ()::int
    FROM hits h
    ORDER BY h.n DESC, h.path, h.ordinal
    LIMIT match_count OFFSET match_offset
$$;
