"""Helpers of tests/test_table_sources*.py: a tickets table, a counting embedder, a pool,
draining and searching."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import psycopg

from pgrag.embeddings.hashing import HashEmbedder
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.services import table_sources as service
from pgrag.settings import load_settings
from tests.support.pools import vector_pool

TICKETS_SQL = """
CREATE TABLE tickets (
    id       int PRIMARY KEY,
    subject  text,
    body     text,
    notes    text,
    customer text,
    priority int,
    views    int DEFAULT 0
)
"""
TICKETS = [
    (1, "Login fails", "Error E1042 appears when the password has expired.", None, "acme", 1),
    (2, "Invoice missing", "The March invoice never arrived by e-mail.", "resent", "globex", 2),
    (3, "Slow dashboard", "The dashboard takes a minute to load every morning.", None, "acme", 3),
]
MODES = ("keyword", "hybrid", "semantic", "regex")


class CountingEmbedder(HashEmbedder):
    """The hash embedder, counting the texts it is asked to embed as passages."""

    def __init__(self) -> None:
        super().__init__()
        self.passages = 0

    async def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        if not is_query:
            self.passages += len(texts)
        return await super()._embed(texts, is_query=is_query)


def execute(dsn: str, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


def make_tickets(dsn: str, rows: list[tuple[Any, ...]] = TICKETS) -> None:
    execute(dsn, TICKETS_SQL)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.cursor().executemany(
            "INSERT INTO tickets (id, subject, body, notes, customer, priority)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            rows,
        )


def source_settings(dsn: str) -> Any:
    return load_settings(database_url=dsn, embedding_model="hash/384")


@contextlib.asynccontextmanager
async def session(dsn: str) -> AsyncIterator[tuple[Any, CountingEmbedder]]:
    provider = CountingEmbedder()
    async with vector_pool(dsn) as pool:
        yield pool, provider


def tickets_source(**kw: Any) -> service.NewSource:
    args: dict[str, Any] = {
        "table": "tickets",
        "text_columns": ["body", "notes"],
        "title_column": "subject",
        "metadata_columns": ["customer", "priority"],
    }
    return service.NewSource(**{**args, **kw})


async def sync(dsn: str, pool: Any, provider: Any, name: str | None = None) -> list[Any]:
    return await service.sync(pool, provider, source_settings(dsn), name)


async def search(pool: Any, provider: Any, query: str, mode: str, **kw: Any) -> list[Any]:
    page = await SearchService(pool, provider).search(
        SearchRequest(query=query, mode=mode, max_tokens=25000, **kw)
    )
    return page.data.results


def paths(hits: list[Any]) -> set[str]:
    return {h.path for h in hits}
