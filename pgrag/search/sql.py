"""The SQL the search service runs; the ranking itself lives in sql/functions/. Every
ranking is one call of its ranker's function (search/modes.py's rankers' table), all alike:
each argument in named notation, the ranking options as one `opts` argument (OPTIONS_SQL),
the columns RankedRow reads by name, so an argument, an option or a ranker added to them
shifts nothing here."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from psycopg import sql

from pgrag.search.options import OPTIONS_SQL

# what every ranker function takes besides `opts` (search/ranking.py fills them all)
RANK_ARGS: tuple[str, ...] = (
    "query_text",
    "query_embedding",
    "scope",
    "collection_ids",
    "filters",
    "match_count",
    "match_offset",
    "min_similarity",
    "embedding_model",
    "query_lang",
    "with_parts",
)


def _named(names: Iterable[str]) -> sql.Composed:
    """`name => %(name)s, ..., opts => pgrag.ranking_options(...)`: each argument bound by
    its name."""
    return sql.SQL(", ").join(
        [
            *(sql.SQL("{} => {}").format(sql.Identifier(n), sql.Placeholder(n)) for n in names),
            sql.SQL("opts => {}").format(OPTIONS_SQL),
        ]
    )


@cache
def ranking_sql(function: str) -> sql.Composed:
    """The call of a ranker's function: its name comes from the rankers' table, never from
    a request, and is quoted as an identifier."""
    return sql.SQL("SELECT * FROM {}({})").format(
        sql.Identifier("pgrag", function), _named(RANK_ARGS)
    )


# milliseconds, as a literal (SET takes no parameters). A SET statement, not set_config():
# in a scoped transaction Citus passes it on to the workers (sql/functions/10_filters.sql)
LOCAL_STATEMENT_TIMEOUT_SQL = sql.SQL("SET LOCAL statement_timeout = {}")

# 0 when the query is unusable (sql/functions/20_lexical.sql)
LEXICAL_NODES_SQL = "SELECT pgrag.lexical_nodes(%s)"

COLLECTION_IDS_SQL = "SELECT id FROM pgrag.collections WHERE name = %s"

# the hit chunks with their documents and a window of the unit text around each chunk
_CHUNK_DETAILS = sql.SQL(
    """
SELECT c.id, c.document_id::text, d.name, d.path, d.file_type, d.title, d.author,
       d.modified_at, d.outline, c.content, c.char_start, c.char_end, c.page, c.section,
       c.sheet, c.row_start, c.row_end, c.slide, c.heading,
       greatest(c.char_start - %(margin)s, 0) AS base,
       substr(u.body, greatest(c.char_start - %(margin)s, 0) + 1,
              (c.char_end - greatest(c.char_start - %(margin)s, 0)) + %(margin)s) AS window,
       length(u.body) AS body_len, c.lang, c.collection_id, e.chunk_id IS NOT NULL AS has_vector,
       c.context
FROM pgrag.chunks c
-- joined on collection_id too: on Citus, the shard a chunk, its document and unit share
JOIN pgrag.documents d ON d.id = c.document_id AND d.collection_id = c.collection_id
LEFT JOIN pgrag.units u ON u.id = c.unit_id AND u.collection_id = c.collection_id{units_in}
JOIN pgrag.collections col ON col.id = c.collection_id
LEFT JOIN pgrag.embeddings e
       ON e.collection_id = c.collection_id AND e.set_id = col.active_set_id AND e.chunk_id = c.id
WHERE c.id = ANY(%(ids)s){chunks_in}
"""
)


def _in_collections(*tables: str) -> sql.Composed:
    """` AND t.collection_id = ANY(%(collection_ids)s)` for each table."""
    return sql.Composed(
        [
            sql.SQL(" AND {}.collection_id = ANY(%(collection_ids)s::bigint[])").format(
                sql.Identifier(t)
            )
            for t in tables
        ]
    )


CHUNK_DETAILS_SQL = _CHUNK_DETAILS.format(units_in=sql.SQL(""), chunks_in=sql.SQL(""))
# when the search names its collections: on Citus the fetch then goes to their shards only
# (a predicate on each table: Citus does not carry one across a join, and prunes a LEFT
# JOIN's table only on a predicate in its ON clause)
CHUNK_DETAILS_IN_SQL = _CHUNK_DETAILS.format(
    units_in=_in_collections("u"), chunks_in=_in_collections("c", "d")
)

SECRET_SQL = "SELECT secret FROM pgrag.server_secret"

LOG_SQL = """
INSERT INTO pgrag.search_log (query, mode, scope, params, query_embedding, model, degraded,
                              results, timings, caller, rerank_model, rerank_outcome, rerank,
                              rerank_cost, score_parts)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
RETURNING id
"""

# the text of the candidates sent to the rerank model (search/rerank.py)
RERANK_TEXTS_SQL = "SELECT id, content FROM pgrag.chunks WHERE id = ANY(%(ids)s)"
# when the search names its collections: on Citus read on their shards only
RERANK_TEXTS_IN_SQL = RERANK_TEXTS_SQL + " AND collection_id = ANY(%(collection_ids)s::bigint[])"
