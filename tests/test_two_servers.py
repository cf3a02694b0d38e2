"""The server tier scales out: two `pgrag serve --transport http`
processes against one PostgreSQL serve the same data, and a change made through either
process or the CLI reaches the MCP clients of both (each process LISTENs for the change
notifications itself). The same on a Citus cluster: tests/test_citus_notify.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg

from tests.support.notify import Listener
from tests.support.two_servers import two_servers_relay_every_change


def test_two_serve_processes_both_relay_every_change(dsn: str, tmp_path: Path) -> None:
    asyncio.run(two_servers_relay_every_change(dsn, tmp_path))


def test_the_writer_adds_nothing_where_the_trigger_notifies(dsn: str) -> None:
    """On a single server the trigger notifies; the writer's call is a no-op there, so
    clients see exactly what they saw before the cluster needed it."""

    async def sent() -> list[str]:
        async with Listener(dsn) as listener:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                await conn.execute("SELECT pgrag.announce_documents_changed('UPDATE')")
            return await listener.since_last()

    with psycopg.connect(dsn) as conn:
        trigger = conn.execute(
            "SELECT count(*) FROM pg_trigger WHERE tgname = 'documents_changed'"
            " AND tgrelid = 'pgrag.documents'::regclass"
        ).fetchone()
    assert trigger == (1,)
    assert asyncio.run(sent()) == []
