"""Table sources' queue: one entry per statement (a bulk write queues its keys as one
array), exact pending counts over the arrays, and two drainers sharing a bulk statement's
keys exactly once (real PostgreSQL, real triggers)."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from pgrag.db import migrations
from pgrag.ingest import table_sync
from pgrag.services import table_sources as service
from tests.support.pools import vector_pool
from tests.support.table_sources import (
    TICKETS,
    execute,
    make_tickets,
    session,
    sync,
    tickets_source,
)

pytestmark = pytest.mark.anyio

BULK_SQL = """
INSERT INTO tickets (id, subject, body, customer, priority)
SELECT g, 'Ticket ' || g, 'Printer error E' || g, 'acme', 1 FROM generate_series(%s::int, %s::int) g
"""


def queue(dsn: str) -> tuple[int, int]:
    """(queue entries, keys in them)"""
    ((entries, keys),) = execute(
        dsn,
        "SELECT count(*), coalesce(sum(cardinality(keys)), 0)::int FROM pgrag.source_queue",
    )
    return entries, keys


async def test_a_bulk_statement_queues_one_entry_and_pending_stays_exact(dsn: str) -> None:
    make_tickets(dsn)
    async with session(dsn) as (pool, provider):
        await service.add_source(pool, tickets_source())
        await sync(dsn, pool, provider)
        execute(dsn, BULK_SQL, (100, 10_099))
        assert queue(dsn) == (1, 10_000)
        (info,) = await service.list_sources(pool)
        assert info.pending == 10_000
        # the same rows changed again: a second entry, the same rows pending
        execute(dsn, "UPDATE tickets SET body = body || ' again' WHERE id BETWEEN 100 AND 5099")
        execute(dsn, "UPDATE tickets SET views = views + 1")  # not indexed: no entry
        execute(dsn, "UPDATE tickets SET id = id + 100000 WHERE id = 1")  # old key and new
        assert queue(dsn) == (3, 15_002)
        (info,) = await service.list_sources(pool)
        assert info.pending == 10_002
        execute(dsn, "DELETE FROM tickets WHERE id BETWEEN 1100 AND 10099")  # a shorter drain
        (info,) = await service.list_sources(pool)
        assert info.pending == 10_002
        (done,) = await sync(dsn, pool, provider)
        assert (done.written, done.removed) == (1_001, 1)  # ids 100-1099 and 100001; 1
        assert queue(dsn) == (0, 0)
        (info,) = await service.list_sources(pool)
        assert (info.rows_indexed, info.pending) == (1_003, 0)
    assert execute(
        dsn,
        "SELECT count(*) FROM tickets t JOIN pgrag.documents d"
        " ON d.source_key = jsonb_build_object('id', t.id) AND d.status = 'ready'",
    ) == [(1_003,)]


async def test_two_drainers_share_a_bulk_statement_exactly_once(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(table_sync, "BATCH", 100)  # 1,500 keys: 15 claims to share
    make_tickets(dsn, [])
    async with session(dsn) as (pool, provider):
        await service.add_source(pool, tickets_source())
        await sync(dsn, pool, provider)
        execute(dsn, BULK_SQL, (1, 1500))
        assert queue(dsn) == (1, 1500)
        # as a first drainer's split step does (committed before it claims), so that both
        # find entries to claim; the drains split nothing more
        ((sid,),) = execute(dsn, "SELECT id FROM pgrag.table_sources")
        execute(dsn, "SELECT pgrag.table_source_split(%s, 100, 100)", (sid,))
        assert queue(dsn) == (15, 1500)
        async with vector_pool(dsn) as other:  # a second server
            first, second = await asyncio.gather(
                sync(dsn, pool, provider), sync(dsn, other, provider)
            )
    (a,), (b,) = first, second
    # every row written once, by one of them: a row drained twice would be `unchanged`
    assert (a.written + b.written, a.unchanged + b.unchanged) == (1500, 0)
    assert queue(dsn) == (0, 0)
    assert execute(
        dsn,
        "SELECT count(*), count(DISTINCT source_key) FROM pgrag.documents"
        " WHERE table_source_id IS NOT NULL AND status = 'ready'",
    ) == [(1500, 1500)]


async def test_a_source_compiles_its_own_trigger_function(dsn: str) -> None:
    """The column names are compiled into a function of the source's own (static
    statements, planned once per session), quoted: a column named like SQL stays a name."""
    execute(dsn, 'CREATE TABLE notes (id bigint PRIMARY KEY, "b$$o""dy" text, other text)')
    async with session(dsn) as (pool, provider):
        await service.add_source(
            pool,
            tickets_source(
                table="notes", text_columns=['b$$o"dy'], title_column=None, metadata_columns=[]
            ),
        )
        execute(dsn, """INSERT INTO notes VALUES (1, 'quoted zx9917', 'x')""")
        (fn,) = execute(
            dsn,
            "SELECT p.prosrc FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid"
            " WHERE t.tgrelid = 'notes'::regclass AND NOT t.tgisinternal LIMIT 1",
        )
        assert "EXECUTE" not in fn[0] and '"b$$o""dy"' in fn[0]
        assert queue(dsn) == (1, 1)
        await sync(dsn, pool, provider)
        (info,) = await service.list_sources(pool)
        assert (info.rows_indexed, info.pending) == (1, 0)
        execute(dsn, "UPDATE notes SET other = 'y'")  # not indexed
        assert queue(dsn) == (0, 0)


async def test_an_upgrade_moves_a_former_source_to_its_own_function(dsn: str) -> None:
    """A source added before functions were generated (its triggers call the shared
    pgrag.table_source_changed(), one key per entry) moves to its own when the function
    files are applied; what it queued before is drained as before."""
    make_tickets(dsn)
    async with session(dsn) as (pool, provider):
        await service.add_source(pool, tickets_source())
        await sync(dsn, pool, provider)
        ((sid,),) = execute(dsn, "SELECT id FROM pgrag.table_sources")
        execute(dsn, "SELECT pgrag.drop_table_source_triggers(%s, 'tickets')", (sid,))
        execute(dsn, "SELECT pgrag.drop_table_source_function(%s)", (sid,))
        for event, table in (
            ("INSERT", "NEW TABLE AS new_rows"),
            ("DELETE", "OLD TABLE AS old_rows"),
        ):
            execute(
                dsn,
                f"CREATE TRIGGER pgrag_source_{sid}_{event[:3].lower()} AFTER {event} ON tickets"
                f" REFERENCING {table} FOR EACH STATEMENT"
                f" EXECUTE FUNCTION pgrag.table_source_changed('{sid}')",
            )
        execute(dsn, "INSERT INTO tickets (id, subject, body) VALUES (4, 'Old', 'Former qv4410')")
        assert execute(dsn, "SELECT key, keys FROM pgrag.source_queue") == [({"id": 4}, None)]
        conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
        try:
            await conn.execute("UPDATE pgrag.schema_functions SET checksum = 'old'")
            await migrations.migrate(conn)
        finally:
            await conn.close()
        functions = execute(
            dsn,
            "SELECT DISTINCT p.proname FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid"
            " WHERE t.tgrelid = 'tickets'::regclass AND NOT t.tgisinternal",
        )
        assert functions == [(f"table_source_changed_{sid}",)]
        execute(dsn, "INSERT INTO tickets (id, subject, body) VALUES (5, 'New', 'Current qv5520')")
        assert queue(dsn) == (2, 1)  # the former entry (one `key`) and the new one
        (info,) = await service.list_sources(pool)
        assert info.pending == 2
        (done,) = await sync(dsn, pool, provider)
        assert done.written == 2 and queue(dsn) == (0, 0)


async def test_re_adding_with_another_key_replaces_the_old_keys_documents(dsn: str) -> None:
    """Documents are named by key: a source added again with other key columns drops the
    documents of the old key form (and any entry queued in it) and indexes every row under
    the new one, with no row twice."""
    make_tickets(dsn)
    async with session(dsn) as (pool, provider):
        await service.add_source(pool, tickets_source())
        await sync(dsn, pool, provider)
        execute(dsn, "ALTER TABLE tickets ADD COLUMN code text")
        execute(dsn, "UPDATE tickets SET code = 'T-' || id")
        execute(dsn, "CREATE UNIQUE INDEX tickets_code ON tickets (code)")
        execute(dsn, "DELETE FROM tickets WHERE id = 2")  # queued in the old key form
        await service.add_source(pool, tickets_source(id_columns=["code"]))
        await sync(dsn, pool, provider)
        (info,) = await service.list_sources(pool)
        assert (info.rows_indexed, info.pending) == (len(TICKETS) - 1, 0)
    docs = execute(dsn, "SELECT path FROM pgrag.documents ORDER BY path")
    assert docs == [(f"tables/tickets/T-{t[0]}",) for t in sorted(TICKETS) if t[0] != 2]
