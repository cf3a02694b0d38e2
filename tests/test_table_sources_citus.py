"""Table sources on a Citus cluster: a table local to the coordinator works as a source
(triggers and queue on the coordinator, pgrag's documents distributed by collection); a
distributed or reference table is refused in one line (Citus fires no trigger pgrag could
see on a shard, and refuses triggers on reference tables)."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from pgrag.services import table_sources as service
from pgrag.settings import load_settings
from tests.support.citus import CitusCluster, fresh_database, migrate
from tests.support.table_sources import (
    execute,
    make_tickets,
    paths,
    search,
    session,
    sync,
    tickets_source,
)


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


def test_a_large_backfill_on_the_cluster_builds_the_index_on_every_shard_at_its_end(
    citus: CitusCluster,
) -> None:
    """pgrag.embeddings is distributed: the index is dropped and built through the
    coordinator (Citus propagates both to every shard), valid on every worker after."""
    url = fresh_database(citus)
    asyncio.run(migrate(url, True))
    make_tickets(url, [])
    execute(
        url,
        "INSERT INTO tickets (id, subject, body, customer, priority) SELECT g, 'Ticket ' || g,"
        " 'Printer error E' || g || ' on floor ' || (g %% 9), 'acme', 1"
        " FROM generate_series(1, 300) g",
    )
    settings = load_settings(database_url=url, embedding_model="hash/384", backfill_index_rows=100)
    shard_indexes = (  # the collection's index on each worker's shards: valid/all
        "SELECT result FROM run_command_on_workers($$SELECT count(*) FILTER (WHERE i.indisvalid)"
        " || '/' || count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE c.relname LIKE 'embeddings_hnsw_%%'$$) ORDER BY nodeport"
    )
    seen: list[list[tuple[str]]] = []

    async def run() -> None:
        async with session(url) as (pool, provider):
            await service.add_source(pool, tickets_source(text_columns=["body"]))
            (done,) = await service.sync(
                pool, provider, settings, None, lambda _: seen.append(execute(url, shard_indexes))
            )
            assert (done.written, done.failure) == (300, None)
            hits = await search(pool, provider, "Printer error E250 on floor 7", "semantic")
            assert hits and hits[0].source is not None and hits[0].source.key == {"id": 250}

    asyncio.run(run())
    assert seen and all(r == [("0/0",), ("0/0",)] for r in seen)  # none while vectors went in
    ((set_id,),) = execute(url, "SELECT active_set_id FROM pgrag.collections")
    ((valid,),) = execute(
        url,
        f"SELECT indisvalid FROM pg_index WHERE indexrelid = 'pgrag.embeddings_hnsw_{set_id}'::regclass",
    )
    assert valid
    after = [r[0] for r in execute(url, shard_indexes)]
    assert all(n.split("/")[0] == n.split("/")[1] != "0" for n in after), after
