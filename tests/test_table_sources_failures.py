"""Table sources: a row that cannot become a document fails alone, with its reason and a
stable code in `source list` and status, and the rest of its batch goes on (issue 40).
Real triggers, real PostgreSQL."""

from __future__ import annotations

import pytest

from pgrag.services import status as status_service
from pgrag.services import table_sources as service
from pgrag.settings import load_settings
from tests.support.table_sources import (
    execute,
    make_tickets,
    paths,
    search,
    session,
    sync,
    tickets_source,
)

pytestmark = pytest.mark.anyio

BIG = "word " * 220_001  # 1.1 M characters: over the smallest PGRAG_PARSE_MAX_CHARS
# a composite column whose cast to text fails for one value: what the drain reads as text
CAST_SQL = """
CREATE TYPE amount AS (value numeric, currency text);
CREATE FUNCTION amount_text(a amount) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF a.currency IS NULL THEN
        RAISE EXCEPTION 'amount %% has no currency', a.value USING ERRCODE = '22023';
    END IF;
    RETURN a.value || ' ' || a.currency;
END $$;
CREATE CAST (amount AS text) WITH FUNCTION amount_text(amount);
CREATE TABLE orders (id int PRIMARY KEY, note text, price amount);
"""


async def test_a_row_over_the_bounds_fails_alone_and_recovers_when_fixed(dsn: str) -> None:
    make_tickets(dsn)
    settings = load_settings(
        database_url=dsn, embedding_model="hash/384", parse_max_chars=1_000_000
    )
    async with session(dsn) as (pool, provider):
        await service.add_source(pool, tickets_source())
        await service.sync(pool, provider, settings)
        execute(dsn, "INSERT INTO tickets (id, subject, body) VALUES (8, 'Huge', %s)", (BIG,))
        execute(dsn, "INSERT INTO tickets (id, subject, body) VALUES (9, 'Fine', 'Toner qk3301')")
        (done,) = await service.sync(pool, provider, settings)
        assert (done.failed, done.written, done.failure) == (1, 1, None)
        assert paths(await search(pool, provider, "qk3301", "keyword")) == {"tables/tickets/9"}
        (info,) = await service.list_sources(pool)
        assert (info.state, info.rows_indexed, info.rows_failed, info.pending) == ("ready", 4, 1, 0)
        (row,) = info.failed_rows
        assert (row.key, row.code) == ({"id": 8}, "TOO_LARGE")
        assert "PGRAG_PARSE_MAX_CHARS" in row.reason
        async with pool.connection() as conn:
            report = await status_service.status_report(conn)
        (shown,) = report["sources"]
        assert shown["rows_failed"] == 1 and shown["failed_rows"][0]["code"] == "TOO_LARGE"

        execute(dsn, "UPDATE tickets SET body = 'Now small zz7720' WHERE id = 8")
        (done,) = await service.sync(pool, provider, settings)
        assert (done.failed, done.written) == (0, 1)
        (info,) = await service.list_sources(pool)
        assert (info.rows_indexed, info.rows_failed, info.failed_rows) == (5, 0, [])
        assert paths(await search(pool, provider, "zz7720", "hybrid")) >= {"tables/tickets/8"}


async def test_a_value_that_fails_to_cast_fails_its_row_only(dsn: str) -> None:
    execute(dsn, CAST_SQL)
    execute(
        dsn,
        "INSERT INTO orders VALUES (1, 'First order ab1001', ROW(10, 'EUR')),"
        " (2, 'Second order ab1002', ROW(20, NULL)), (3, 'Third order ab1003', ROW(30, 'USD'))",
    )
    async with session(dsn) as (pool, provider):
        await service.add_source(
            pool, service.NewSource(table="orders", text_columns=["note", "price"])
        )
        (done,) = await sync(dsn, pool, provider)
        assert (done.failure, done.written, done.failed) == (None, 2, 1)
        assert paths(await search(pool, provider, "ab1003", "keyword")) == {"tables/orders/3"}
        (info,) = await service.list_sources(pool)
        assert (info.state, info.rows_indexed, info.rows_failed) == ("ready", 2, 1)
        (row,) = info.failed_rows
        assert (row.key, row.code) == ({"id": 2}, "DB_ERROR")
        assert "has no currency" in row.reason

        execute(dsn, "INSERT INTO orders VALUES (4, 'Fourth order ab1004', ROW(40, 'GBP'))")
        execute(dsn, "DELETE FROM orders WHERE id = 2")
        (done,) = await sync(dsn, pool, provider)
        assert (done.failed, done.written) == (0, 1)
        (info,) = await service.list_sources(pool)
        assert (info.rows_indexed, info.rows_failed) == (3, 0)
