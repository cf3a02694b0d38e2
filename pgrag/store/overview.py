"""What the console's overview and chart read: each collection's documents by status,
chunks, model and dimensions; the database's size; how a logged search's fused scores are
made up (pgrag.explain_parts). `scope` is the collections the caller may see (None = all);
row-level security enforces it again on scoped connections."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
from psycopg.rows import class_row

from pgrag.db.one import scalar

COLLECTIONS_SQL = """
SELECT c.name, es.model, es.dimensions,
       count(d.id) FILTER (WHERE d.status = 'pending') AS pending,
       count(d.id) FILTER (WHERE d.status = 'processing') AS processing,
       count(d.id) FILTER (WHERE d.status = 'ready') AS ready,
       count(d.id) FILTER (WHERE d.status = 'failed') AS failed,
       (SELECT count(*) FROM pgrag.chunks ch WHERE ch.collection_id = c.id) AS chunks
FROM pgrag.collections c
LEFT JOIN pgrag.embedding_sets es ON es.id = c.active_set_id
LEFT JOIN pgrag.documents d ON d.collection_id = c.id
WHERE %(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[])
GROUP BY c.id, c.name, es.model, es.dimensions
ORDER BY c.name
"""
COLLECTION_NAMES_SQL = """
SELECT name FROM pgrag.collections
WHERE %(scope)s::text[] IS NULL OR name = ANY(%(scope)s::text[])
ORDER BY name
"""
# the file-type filter's choices: a scan of the documents table alone (no chunk read)
FILE_TYPES_SQL = """
SELECT DISTINCT d.file_type FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id
WHERE %(scope)s::text[] IS NULL OR c.name = ANY(%(scope)s::text[])
ORDER BY 1 LIMIT 200
"""
DATABASE_SIZE_SQL = "SELECT pg_database_size(current_database())"
EXPLAIN_PARTS_SQL = "SELECT * FROM pgrag.explain_parts(%s)"
# what "Copy as SQL" gives: the logged search replayed in psql, ranked as it was
REPRODUCE_SQL = """SELECT rank, chunk_id, document_path, location, lexical_rank, lexical_score,
       semantic_rank, semantic_score, fused_score, lexical_share, query_lang, chunk_lang
FROM pgrag.explain_search({log_id})
ORDER BY rank;"""


@dataclass(frozen=True)
class CollectionSummary:
    name: str
    model: str | None
    dimensions: int | None
    pending: int
    processing: int
    ready: int
    failed: int
    chunks: int

    @property
    def documents(self) -> int:
        return self.pending + self.processing + self.ready + self.failed


@dataclass(frozen=True)
class ScoreParts:
    """One result of a replayed search: the two terms its fused score adds up from."""

    rank: int
    chunk_id: int
    fusion: str
    lexical_part: float
    semantic_part: float
    fused_score: float
    lexical_share: float | None
    semantic_cosine: float | None
    centred: bool | None
    query_lang: str | None
    chunk_lang: str | None


async def collections(
    conn: psycopg.AsyncConnection, scope: list[str] | None
) -> list[CollectionSummary]:
    async with conn.cursor(row_factory=class_row(CollectionSummary)) as cur:
        await cur.execute(COLLECTIONS_SQL, {"scope": scope})
        return await cur.fetchall()


async def collection_names(conn: psycopg.AsyncConnection, scope: list[str] | None) -> list[str]:
    """The names of the collections the caller may see (a filter's choices)."""
    rows = await (await conn.execute(COLLECTION_NAMES_SQL, {"scope": scope})).fetchall()
    return [r[0] for r in rows]


async def file_types(conn: psycopg.AsyncConnection, scope: list[str] | None) -> list[str]:
    """The file types of the documents the caller may see (a filter's choices)."""
    rows = await (await conn.execute(FILE_TYPES_SQL, {"scope": scope})).fetchall()
    return [r[0] for r in rows]


async def database_size(conn: psycopg.AsyncConnection) -> int:
    return int(await scalar(conn, DATABASE_SIZE_SQL))


async def score_parts(conn: psycopg.AsyncConnection, log_id: int) -> list[ScoreParts]:
    async with conn.cursor(row_factory=class_row(ScoreParts)) as cur:
        await cur.execute(EXPLAIN_PARTS_SQL, (log_id,))
        return await cur.fetchall()


def reproduce_sql(log_id: int) -> str:
    """The psql statement that replays logged search `log_id` (an id, never user text)."""
    return REPRODUCE_SQL.format(log_id=int(log_id))
