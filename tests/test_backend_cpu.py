"""A call is charged the CPU its PostgreSQL backends spent on it: the pool reads each
backend's CPU time when the call takes a connection and when it comes back. A busy backend
counts its work, a waiting one nothing, and work on another call's connection is not ours."""

from __future__ import annotations

import asyncio

import pytest

from pgrag.db.database import open_database
from pgrag.settings import load_settings
from pgrag.store.backend_cpu import metering

pytestmark = pytest.mark.anyio

BURN = "SELECT count(*) FROM generate_series(1, 4000000) g WHERE g % 7 = 3"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_busy_backend_counts_its_cpu_and_a_waiting_one_nothing(dsn: str) -> None:
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        with metering() as busy:
            async with db.pool.connection() as conn:
                await conn.execute(BURN)
        with metering() as waiting:
            async with db.pool.connection() as conn:
                await conn.execute("SELECT pg_sleep(0.4)")
        await asyncio.sleep(0.1)  # the pool's worker closes the returned connections' uses
        assert busy.seconds() >= 0.1, busy
        assert waiting.seconds() < 0.05, waiting


async def test_another_calls_work_on_the_same_backend_is_not_counted(dsn: str) -> None:
    async with open_database(load_settings(), dsn=dsn, max_size=1) as db:
        with metering() as first:
            async with db.pool.connection() as conn:
                await conn.execute("SELECT 1")
        with metering() as second:  # the one connection again, now burning for another call
            async with db.pool.connection() as conn:
                await conn.execute(BURN)
        await asyncio.sleep(0.1)
        assert second.seconds() >= 0.1
        assert first.seconds() < 0.05, first


async def test_connections_taken_outside_a_call_are_not_metered(dsn: str) -> None:
    async with open_database(load_settings(), dsn=dsn, max_size=1) as db:
        async with db.pool.connection() as conn:
            await conn.execute("SELECT 1")
        with metering() as meter:
            pass
        assert meter.uses == []
