"""The search log as the console shows it: recent searches by caller, mode and collection
with their result counts, the ones that found nothing, and p50/p95 latency per hour. Scoped
like everything else: a collection-limited caller sees its own searches only (by its caller
name), whatever filter it asks for; the store's SQL is in store/search_log.py."""

from __future__ import annotations

from dataclasses import dataclass

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict, Field

from pgrag.db.scope import scoped_connection
from pgrag.search.modes import DISTINCT_MODES, SearchMode
from pgrag.store import overview
from pgrag.store import search_log as store
from pgrag.store.search_log import HourOfSearches, LoggedSearch

__all__ = ["HourOfSearches", "LogFilter", "LoggedSearch", "SearchLog", "search_log"]

RECENT = 50
EMPTY = 20
HOURS = 48


class LogFilter(BaseModel):
    """What the page narrows the log to; None: any."""

    model_config = ConfigDict(extra="forbid")

    caller: str | None = Field(None, max_length=200)
    mode: SearchMode | None = None
    collection: str | None = Field(None, max_length=200)


@dataclass(frozen=True)
class SearchLog:
    recent: list[LoggedSearch]
    empty: list[LoggedSearch]  # the recent searches that found nothing
    hourly: list[HourOfSearches]
    callers: list[str]  # what the caller filter offers ([]: only one's own)
    collections: list[str]
    modes: tuple[SearchMode, ...]


async def search_log(
    pool: AsyncConnectionPool, asked: LogFilter, *, caller: str, scope: list[str] | None
) -> SearchLog:
    """The log under `asked`; a limited caller (`scope` not None) is held to its own
    searches and the collections it may read."""
    if scope is not None:
        collection = asked.collection if asked.collection in scope else None
        asked = LogFilter(caller=caller, mode=asked.mode, collection=collection)
    where = asked.model_dump(mode="json")
    # the log is an operator table the scoped role cannot read: narrowed above instead
    async with scoped_connection(pool, None) as conn:
        recent = await store.recent(conn, where, empty=False, limit=RECENT)
        empty = await store.recent(conn, where, empty=True, limit=EMPTY)
        hourly = await store.hourly(conn, where, HOURS)
        callers = await store.callers(conn, HOURS) if scope is None else []
        collections = await overview.collection_names(conn, scope)
    return SearchLog(recent, empty, hourly, callers, collections, DISTINCT_MODES)
