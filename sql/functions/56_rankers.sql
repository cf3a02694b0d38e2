-- The rankers: the functions the search service calls to order a mode's hits, one per row
-- of the rankers' table (pgrag/search/modes.py, `Ranker.function`). The service calls them
-- all alike, in named notation, so each takes the same arguments:
--   query_text      the query's words (NULL: the lexical leg is off), or a pattern ranker's
--                   POSIX pattern
--   query_embedding the query's vector (NULL: the semantic leg is off)
--   scope           'chunks', or 'documents': one row per document, its best chunks in
--                   chunk_ids (at most opts.chunks_per_document)
--   collection_ids, filters   the search's collections (NULL: all) and filters
--   match_count, match_offset the page
--   opts            the ranking options (pgrag.ranking_options)
--   min_similarity, embedding_model, query_lang   the semantic leg's threshold, model and
--                   query language
--   with_parts      an explained search: each fused score's two terms as well
-- and returns the columns of pgrag.store.rows.RankedRow by name, those it has values for:
-- rank (the position in the whole ranking), chunk_id, document_id and total (the rows of
-- the whole ranking) always. A new ranker is a function here and its row in the table.

-- The fused ranking (hybrid, semantic, keyword): pgrag.hybrid_search and its variants.
CREATE OR REPLACE FUNCTION pgrag.rank_fused(
    query_text      text,
    query_embedding vector,
    scope           text,
    collection_ids  bigint[],
    filters         jsonb,
    match_count     int,
    match_offset    int,
    opts            pgrag.ranking_options,
    min_similarity  float8,
    embedding_model text,
    query_lang      text,
    with_parts      boolean
) RETURNS TABLE (
    rank            int,
    chunk_id        bigint,
    document_id     uuid,
    total           int,
    lexical_rank    int,
    lexical_score   float4,
    semantic_rank   int,
    semantic_score  float8,
    fused_score     float8,
    chunk_ids       bigint[],
    fusion          text,
    lexical_part    float8,
    semantic_part   float8,
    lexical_share   float8,
    semantic_cosine float8,
    centred         boolean
)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF rank_fused.scope = 'documents' THEN
        RETURN QUERY
        SELECT h.rank, h.best_chunk_id, h.document_id, h.total_documents, h.lexical_rank,
               h.lexical_score, h.semantic_rank, h.semantic_score, h.fused_score, h.chunk_ids,
               NULL::text, NULL::float8, NULL::float8, NULL::float8, NULL::float8, NULL::boolean
        FROM pgrag.hybrid_search_documents(
            query_text => rank_fused.query_text, query_embedding => rank_fused.query_embedding,
            match_count => rank_fused.match_count, match_offset => rank_fused.match_offset,
            collection_ids => rank_fused.collection_ids, filters => rank_fused.filters,
            opts => rank_fused.opts, min_similarity => rank_fused.min_similarity,
            embedding_model => rank_fused.embedding_model, query_lang => rank_fused.query_lang) h;
    ELSIF rank_fused.with_parts THEN
        RETURN QUERY
        SELECT d.rank, d.chunk_id, d.document_id, d.total_candidates, d.lexical_rank,
               d.lexical_score, d.semantic_rank, d.semantic_score, d.fused_score, NULL::bigint[],
               d.fusion_used, p.lexical_part, p.semantic_part, d.lexical_share,
               d.semantic_cosine, d.centred
        FROM pgrag.hybrid_search_detail(
            query_text => rank_fused.query_text, query_embedding => rank_fused.query_embedding,
            match_count => rank_fused.match_count, match_offset => rank_fused.match_offset,
            collection_ids => rank_fused.collection_ids, filters => rank_fused.filters,
            opts => rank_fused.opts, min_similarity => rank_fused.min_similarity,
            embedding_model => rank_fused.embedding_model, query_lang => rank_fused.query_lang) d
        CROSS JOIN LATERAL pgrag.fused_parts(rank_fused.opts, d.lexical_share, d.lexical_norm,
                                             d.semantic_norm, d.lexical_rank, d.semantic_rank) p
        ORDER BY d.rank;
    ELSE
        RETURN QUERY
        SELECT h.rank, h.chunk_id, h.document_id, h.total_candidates, h.lexical_rank,
               h.lexical_score, h.semantic_rank, h.semantic_score, h.fused_score, NULL::bigint[],
               NULL::text, NULL::float8, NULL::float8, NULL::float8, NULL::float8, NULL::boolean
        FROM pgrag.hybrid_search(
            query_text => rank_fused.query_text, query_embedding => rank_fused.query_embedding,
            match_count => rank_fused.match_count, match_offset => rank_fused.match_offset,
            collection_ids => rank_fused.collection_ids, filters => rank_fused.filters,
            opts => rank_fused.opts, min_similarity => rank_fused.min_similarity,
            embedding_model => rank_fused.embedding_model, query_lang => rank_fused.query_lang) h;
    END IF;
END
$$;

-- Every chunk pgrag.regex_search finds, in the regex ranking's order (pos): most matches
-- first, then document path and position. Two collections can hold the same path, and such
-- ties came back in a different order from one call to the next (pages repeated and
-- skipped hits): the chunk id settles them, so every page of a walk reads one ranking.
CREATE OR REPLACE FUNCTION pgrag.regex_ranked(
    pattern         text,
    collection_ids  bigint[],
    filters         jsonb
) RETURNS TABLE (pos int, chunk_id bigint, document_id uuid, matches int, total_candidates int)
LANGUAGE sql STABLE AS $$
    SELECT row_number() OVER (ORDER BY r.matches DESC, d.path, c.ordinal, r.chunk_id)::int,
           r.chunk_id, r.document_id, r.matches, r.total_candidates
    FROM pgrag.regex_search(regex_ranked.pattern, 2147483647, regex_ranked.collection_ids,
                            regex_ranked.filters, 0) r
    JOIN pgrag.chunks c ON c.id = r.chunk_id
    JOIN pgrag.documents d ON d.id = r.document_id AND d.collection_id = c.collection_id
$$;

-- The regex ranking (regex_ranked), a page of it. The caller sets the statement timeout
-- (a pattern can backtrack for ever); an invalid pattern raises SQLSTATE 2201B.
CREATE OR REPLACE FUNCTION pgrag.rank_regex(
    query_text      text,
    query_embedding vector,
    scope           text,
    collection_ids  bigint[],
    filters         jsonb,
    match_count     int,
    match_offset    int,
    opts            pgrag.ranking_options,
    min_similarity  float8,
    embedding_model text,
    query_lang      text,
    with_parts      boolean
) RETURNS TABLE (
    rank          int,
    chunk_id      bigint,
    document_id   uuid,
    total         int,
    regex_matches int,
    chunk_ids     bigint[]
)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF rank_regex.scope = 'documents' THEN
        RETURN QUERY
        WITH hits AS (
            SELECT r.*, row_number() OVER (PARTITION BY r.document_id ORDER BY r.pos) AS nth
            FROM pgrag.regex_ranked(rank_regex.query_text, rank_regex.collection_ids,
                                    rank_regex.filters) r
        ), docs AS (
            SELECT b.document_id, b.chunk_id, b.pos AS best_rank,
                   (SELECT sum(x.matches) FROM hits x
                     WHERE x.document_id = b.document_id)::int AS n,
                   (SELECT array_agg(x.chunk_id ORDER BY x.pos) FROM hits x
                     WHERE x.document_id = b.document_id
                       AND x.nth <= (rank_regex.opts).chunks_per_document) AS ids
            FROM hits b WHERE b.nth = 1
        )
        SELECT row_number() OVER (ORDER BY d.n DESC, d.best_rank)::int, d.chunk_id,
               d.document_id, count(*) OVER ()::int, d.n, d.ids
        FROM docs d
        ORDER BY d.n DESC, d.best_rank
        LIMIT rank_regex.match_count OFFSET rank_regex.match_offset;
    ELSE
        RETURN QUERY
        SELECT r.pos, r.chunk_id, r.document_id, r.total_candidates, r.matches, NULL::bigint[]
        FROM pgrag.regex_ranked(rank_regex.query_text, rank_regex.collection_ids,
                                rank_regex.filters) r
        ORDER BY r.pos
        LIMIT rank_regex.match_count OFFSET rank_regex.match_offset;
    END IF;
END
$$;
