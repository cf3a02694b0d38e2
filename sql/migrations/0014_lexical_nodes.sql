-- Can a query use the lexical leg? The number of nodes in its lexical form; 0 when it has no
-- searchable words or its lexical form cannot be built (fail soft, SPEC §1: the search goes
-- on without that leg). One statement where the server sent a savepoint, the check and a
-- release: two round trips fewer per search. query_canceled is not caught (timeouts hold).
CREATE FUNCTION pgrag.lexical_nodes(q text) RETURNS int
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE AS $$
BEGIN
    RETURN numnode(pgrag.lexical_query(q));
EXCEPTION WHEN OTHERS THEN
    RETURN 0;
END
$$;
