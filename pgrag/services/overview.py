"""What the web console shows beside search and documents: the collections at a glance and
how a search's fused scores are made up. The SQL is in store/overview.py."""

from __future__ import annotations

from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool

from pgrag.db.scope import scoped_connection
from pgrag.store import overview as store
from pgrag.store.overview import CollectionSummary, ScoreParts


@dataclass(frozen=True)
class Overview:
    collections: list[CollectionSummary]
    database_bytes: int | None  # None for a collection-limited caller: the whole database's


async def overview(pool: AsyncConnectionPool, scope: list[str] | None) -> Overview:
    """The collections the caller may see with their documents by status and chunks."""
    async with scoped_connection(pool, scope) as conn:
        rows = await store.collections(conn, scope)
        size = await store.database_size(conn) if scope is None else None
    return Overview(rows, size)


async def collection_names(pool: AsyncConnectionPool, scope: list[str] | None) -> list[str]:
    """The collections a filter offers the caller: those it may see, by name."""
    async with scoped_connection(pool, scope) as conn:
        return await store.collection_names(conn, scope)


async def file_types(pool: AsyncConnectionPool, scope: list[str] | None) -> list[str]:
    """The file types a filter offers the caller: those of the documents it may see."""
    async with scoped_connection(pool, scope) as conn:
        return await store.file_types(conn, scope)


async def score_parts(pool: AsyncConnectionPool, log_id: int) -> list[ScoreParts]:
    """The terms of each fused score of logged search `log_id`, replayed. Unscoped: the
    search log is an operator table the scoped role cannot read; callers pass only the id of
    the search they have just run, whose logged collections are already the caller's."""
    async with scoped_connection(pool, None) as conn:
        return await store.score_parts(conn, log_id)


def reproduce_sql(log_id: int) -> str:
    return store.reproduce_sql(log_id)
