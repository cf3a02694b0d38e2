"""A table source on a logical-replication subscriber: the apply worker fires only row
triggers set to ENABLE ALWAYS, which pgrag.add_table_source creates there (pgai #557)."""

from __future__ import annotations

import asyncio
import time

import psycopg

from pgrag.db.database import prepare
from tests.support.replication import replication_pair
from tests.support.table_sources import TICKETS_SQL, execute, paths, search, session, sync


def _wait(predicate: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_rows_arriving_by_logical_replication_are_indexed() -> None:
    with replication_pair() as (publisher, subscriber):
        pub, sub = publisher.dsn(), subscriber.dsn()
        execute(pub, TICKETS_SQL)
        execute(
            pub, "INSERT INTO tickets (id, subject, body) VALUES (1, 'One', 'Replicated r1001')"
        )
        execute(pub, "CREATE PUBLICATION tickets_pub FOR TABLE tickets")
        execute(sub, TICKETS_SQL)
        asyncio.run(prepare(sub))
        execute(
            sub,
            "CREATE SUBSCRIPTION tickets_sub CONNECTION "
            f"'host=127.0.0.1 port={publisher.coordinator_port} user=postgres dbname=postgres'"
            " PUBLICATION tickets_pub",
        )
        _wait(lambda: execute(sub, "SELECT count(*) FROM tickets") == [(1,)])
        execute(sub, "SELECT pgrag.add_table_source('tickets', ARRAY['body'])")
        modes = execute(
            sub,
            "SELECT tgenabled, tgtype & 1 FROM pg_trigger WHERE tgrelid = 'tickets'::regclass"
            " ORDER BY tgname",
        )
        assert modes and all(m[0] == "A" for m in modes)  # ENABLE ALWAYS, each of them
        assert sorted(m[1] for m in modes) == [0, 1, 1, 1]  # row-level but TRUNCATE

        execute(pub, "INSERT INTO tickets (id, subject, body) VALUES (2, 'Two', 'Arrived r2002')")
        execute(pub, "UPDATE tickets SET body = 'Changed r1003' WHERE id = 1")
        # one key each (a row trigger per change: the insert's key, the update's key)
        _wait(
            lambda: (
                execute(
                    sub, "SELECT coalesce(sum(cardinality(keys)), 0)::int FROM pgrag.source_queue"
                )
                >= [(2,)]
            )
        )

        async def indexed() -> tuple[set[str], set[str]]:
            async with session(sub) as (pool, provider):
                await sync(sub, pool, provider)
                found = paths(await search(pool, provider, "r2002", "keyword"))
                changed = paths(await search(pool, provider, "r1003", "keyword"))
                return found, changed

        assert asyncio.run(indexed()) == ({"tables/tickets/2"}, {"tables/tickets/1"})
        execute(sub, "DROP SUBSCRIPTION tickets_sub")
        with psycopg.connect(sub, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM pgrag.source_queue").fetchone() == (0,)
