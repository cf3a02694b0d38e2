"""A connection pool as the server opens one (autocommit, pgvector types), for tests that
drive the search service directly."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from pgvector.psycopg import register_vector_async
from psycopg_pool import AsyncConnectionPool


@contextlib.asynccontextmanager
async def vector_pool(dsn: str) -> AsyncIterator[AsyncConnectionPool]:
    pool = AsyncConnectionPool(
        dsn,
        min_size=1,
        max_size=2,
        open=False,
        configure=register_vector_async,
        kwargs={"autocommit": True},
    )
    await pool.open(wait=True, timeout=30)
    try:
        yield pool
    finally:
        await pool.close()
