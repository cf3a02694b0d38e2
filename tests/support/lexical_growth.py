"""A collection whose common terms' document frequencies grow while its rare ones do not,
written server-side (one document and one chunk per row): what tests/test_lexical_growth.py
grows, and the rows a lexical search reads from pgrag.chunks, counted."""

from __future__ import annotations

import psycopg

ADD_SQL = """
WITH d AS (
    INSERT INTO pgrag.documents (id, collection_id, path, folder, name, file_type, title,
                                 status, progress)
    SELECT gen_random_uuid(), %(cid)s, 'g/' || %(tag)s || g || '.txt', 'g',
           %(tag)s || g || '.txt', 'txt', 't', 'ready', 100
    FROM generate_series(1, %(n)s) g
    RETURNING id
), u AS (
    INSERT INTO pgrag.units (collection_id, document_id, kind, number, title, body)
    SELECT %(cid)s, d.id, 'text', 1, NULL, 'x' FROM d
    RETURNING id, document_id
), t AS (
    SELECT u.*, %(text)s || ' ' || (ARRAY['lantern', 'rope', 'gull', 'tide', 'quay'])
               [1 + row_number() OVER () %% 5] AS content
    FROM u
)
INSERT INTO pgrag.chunks (document_id, collection_id, unit_id, ordinal, heading, content,
                          content_hash, token_count, char_start, char_end, lang)
SELECT t.document_id, %(cid)s, t.id, 1, NULL, t.content, sha256(t.content::bytea), 5, 0,
       length(t.content), 'en'
FROM t
"""
ROWS_READ_SQL = "SELECT pg_stat_get_xact_tuples_fetched('pgrag.chunks'::regclass)"
SEARCH_SQL = "SELECT chunk_id FROM pgrag.lexical_candidates(%s, collection_ids => %s)"


def add(conn: psycopg.Connection, cid: int, text: str, n: int, tag: str) -> None:
    """n chunks holding `text` and one of five filler words."""
    conn.execute(ADD_SQL, {"cid": cid, "text": text, "n": n, "tag": tag})


def rows_read(conn: psycopg.Connection, query: str, collections: list[int] | None) -> int:
    """Rows of pgrag.chunks one lexical search fetches (heap tuples, index or bitmap scans)."""
    with conn.transaction():
        before = conn.execute(ROWS_READ_SQL).fetchone()
        conn.execute(SEARCH_SQL, (query, collections)).fetchall()
        after = conn.execute(ROWS_READ_SQL).fetchone()
    assert before is not None and after is not None
    return int(after[0]) - int(before[0])
