"""Table sources on a Citus cluster: a table local to the coordinator works as a source
(triggers and queue on the coordinator, pgrag's documents distributed by collection); a
distributed or reference table is refused in one line (Citus fires no trigger pgrag could
see on a shard, and refuses triggers on reference tables)."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from pgrag.services import table_sources as service
from tests.support.citus import CitusCluster, fresh_database, migrate
from tests.support.table_sources import execute, make_tickets, paths, search, session, sync


def test_local_tables_are_sources_and_distributed_or_reference_ones_are_refused(
    citus: CitusCluster,
) -> None:
    url = fresh_database(citus)
    asyncio.run(migrate(url, True))
    make_tickets(url)  # local to the coordinator
    execute(url, "CREATE TABLE notes (id int PRIMARY KEY, answer text)")
    execute(url, "INSERT INTO notes VALUES (1, 'Local answer rf5501')")
    execute(url, "CREATE TABLE faq (id int PRIMARY KEY, answer text)")
    execute(url, "SELECT create_reference_table('faq')")
    execute(url, "CREATE TABLE events (id int PRIMARY KEY, note text)")
    execute(url, "SELECT create_distributed_table('events', 'id')")
    for table in ("events", "faq"):
        with pytest.raises(psycopg.errors.FeatureNotSupported) as refused:
            execute(url, f"SELECT pgrag.add_table_source('{table}', ARRAY['id'])")
        assert refused.value.diag.message_primary == (
            f"pgrag: {table} is a distributed or reference Citus table: pgrag indexes tables "
            "local to the coordinator only"
        )
    execute(
        url, "SELECT pgrag.add_table_source('tickets', ARRAY['body'], title_column => 'subject')"
    )
    execute(url, "SELECT pgrag.add_table_source('notes', ARRAY['answer'])")

    async def run() -> None:
        async with session(url) as (pool, provider):
            await sync(url, pool, provider)
            assert paths(await search(pool, provider, "E1042", "keyword")) == {"tables/tickets/1"}
            assert paths(await search(pool, provider, "rf5501", "keyword")) == {"tables/notes/1"}
            execute(url, "INSERT INTO notes VALUES (2, 'Second local rf5502')")
            execute(url, "UPDATE tickets SET body = 'Now about lc7701' WHERE id = 2")
            execute(url, "DELETE FROM tickets WHERE id = 3")
            execute(url, "TRUNCATE notes")
            execute(url, "INSERT INTO notes VALUES (3, 'After truncate rf5503')")
            done = {p.name: p for p in await sync(url, pool, provider)}
            assert all(p.failure is None for p in done.values()), done
            assert paths(await search(pool, provider, "rf5503", "keyword")) == {"tables/notes/3"}
            assert paths(await search(pool, provider, "rf5501", "keyword")) == set()
            assert paths(await search(pool, provider, "lc7701", "keyword")) == {"tables/tickets/2"}
            infos = {i.name: i for i in await service.list_sources(pool)}
            assert (infos["tickets"].rows_indexed, infos["tickets"].pending) == (2, 0)
            assert (infos["notes"].rows_indexed, infos["notes"].pending) == (1, 0)

    asyncio.run(run())
