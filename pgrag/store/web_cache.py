"""The web search cache (`pgrag.web_cache`, migration 0010): normalised result lists by
(query, language, recency), fresh for a time-to-live; expired rows are purged on write."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from pgrag.db.one import scalar

GET_SQL = """
SELECT items, total, fetched_at FROM pgrag.web_cache
WHERE query = %(query)s AND language = %(language)s AND recency_days = %(recency)s
  AND fetched_at > now() - make_interval(secs => %(ttl)s)
"""
PUT_SQL = """
INSERT INTO pgrag.web_cache (query, language, recency_days, items, total, fetched_at)
VALUES (%(query)s, %(language)s, %(recency)s, %(items)s, %(total)s, now())
ON CONFLICT (query, language, recency_days)
DO UPDATE SET items = EXCLUDED.items, total = EXCLUDED.total, fetched_at = EXCLUDED.fetched_at
RETURNING fetched_at
"""
PURGE_SQL = "DELETE FROM pgrag.web_cache WHERE fetched_at <= now() - make_interval(secs => %s)"


async def cached(
    conn: psycopg.AsyncConnection, key: dict[str, Any], ttl: int
) -> tuple[list[dict[str, Any]], int | None, datetime] | None:
    """(items, upstream total, when fetched) for `key` (query, language, recency) while
    younger than `ttl` seconds; None when absent, stale, or caching is off (ttl <= 0)."""
    if ttl <= 0:
        return None
    row = await (await conn.execute(GET_SQL, {**key, "ttl": ttl})).fetchone()
    return (list(row[0]), row[1], row[2]) if row else None


async def remember(
    conn: psycopg.AsyncConnection,
    key: dict[str, Any],
    items: list[dict[str, Any]],
    total: int | None,
    ttl: int,
) -> datetime:
    """Store a fresh answer (dropping every expired one first); when it was fetched."""
    await conn.execute(PURGE_SQL, (ttl,))
    fetched_at: datetime = await scalar(
        conn, PUT_SQL, {**key, "items": Jsonb(items), "total": total}
    )
    return fetched_at
