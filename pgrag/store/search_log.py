"""What the console's search log page reads from pgrag.search_log: recent searches, those
that found nothing, and latency per hour, each under the same filter (caller, mode,
collection). An operator table: read on an unscoped connection, the service narrowing a
collection-limited caller to its own searches."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import class_row

# the filter every query shares; NULL: any. A collection matches a search restricted to it.
_FILTER = """
    (%(caller)s::text IS NULL OR l.caller = %(caller)s)
    AND (%(mode)s::text IS NULL OR l.mode = %(mode)s)
    AND (%(collection)s::text IS NULL OR l.params -> 'collection_ids' @> (
         SELECT to_jsonb(c.id) FROM pgrag.collections c WHERE c.name = %(collection)s))
"""
RECENT_SQL = f"""
SELECT l.id, l.created_at, l.caller, l.query, l.mode, l.scope, l.params, l.degraded,
       jsonb_array_length(l.results) AS results,
       (l.timings ->> 'total_ms')::float8 AS took_ms,
       ARRAY(SELECT c.name FROM pgrag.collections c
             WHERE l.params -> 'collection_ids' @> to_jsonb(c.id) ORDER BY c.name)
           AS collections
FROM pgrag.search_log l
WHERE {_FILTER} AND (NOT %(empty)s OR jsonb_array_length(l.results) = 0)
ORDER BY l.id DESC
LIMIT %(limit)s
"""
HOURLY_SQL = f"""
SELECT date_trunc('hour', l.created_at) AS hour, count(*) AS searches,
       count(*) FILTER (WHERE jsonb_array_length(l.results) = 0) AS empty,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY (l.timings ->> 'total_ms')::float8) AS p50_ms,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY (l.timings ->> 'total_ms')::float8) AS p95_ms
FROM pgrag.search_log l
WHERE {_FILTER} AND l.created_at > now() - make_interval(hours => %(hours)s)
GROUP BY 1
ORDER BY 1 DESC
"""
CALLERS_SQL = """
SELECT DISTINCT caller FROM pgrag.search_log
WHERE caller IS NOT NULL AND created_at > now() - make_interval(hours => %(hours)s)
ORDER BY caller
"""


@dataclass(frozen=True)
class LoggedSearch:
    id: int
    created_at: datetime
    caller: str | None
    query: str
    mode: str
    scope: str
    params: dict[str, Any]
    degraded: list[str]
    results: int
    took_ms: float | None
    collections: list[str]  # [] when it searched every collection


@dataclass(frozen=True)
class HourOfSearches:
    hour: datetime
    searches: int
    empty: int
    p50_ms: float | None
    p95_ms: float | None


async def recent(
    conn: psycopg.AsyncConnection, where: dict[str, Any], *, empty: bool, limit: int
) -> list[LoggedSearch]:
    async with conn.cursor(row_factory=class_row(LoggedSearch)) as cur:
        await cur.execute(RECENT_SQL, {**where, "empty": empty, "limit": limit})
        return await cur.fetchall()


async def hourly(
    conn: psycopg.AsyncConnection, where: dict[str, Any], hours: int
) -> list[HourOfSearches]:
    async with conn.cursor(row_factory=class_row(HourOfSearches)) as cur:
        await cur.execute(HOURLY_SQL, {**where, "hours": hours})
        return await cur.fetchall()


async def callers(conn: psycopg.AsyncConnection, hours: int) -> list[str]:
    rows = await (await conn.execute(CALLERS_SQL, {"hours": hours})).fetchall()
    return [r[0] for r in rows]
