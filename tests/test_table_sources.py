"""Table sources: rows of the user's own tables indexed as documents and kept in sync by
triggers (issue 40). Real PostgreSQL, real triggers, every search mode."""

from __future__ import annotations

import psycopg
import pytest

from pgrag.services import table_sources as service
from tests.support.table_sources import (
    MODES,
    execute,
    make_tickets,
    paths,
    search,
    session,
    source_settings,
    sync,
    tickets_source,
)

pytestmark = pytest.mark.anyio


async def test_rows_become_documents_searchable_in_every_mode(dsn: str) -> None:
    make_tickets(dsn)
    async with session(dsn) as (pool, provider):
        info = await service.add_source(pool, tickets_source())
        assert (info.name, info.table, info.pending, info.state) == (
            "tickets",
            "tickets",
            3,
            "backfilling",
        )
        await sync(dsn, pool, provider)
        for mode in MODES:
            query = "E1042" if mode != "regex" else "E10[0-9]+"
            hits = await search(pool, provider, query, mode)
            assert "tables/tickets/1" in paths(hits), mode
        (info,) = await service.list_sources(pool)
        assert (info.rows_indexed, info.pending, info.state) == (3, 0, "ready")
    (doc,) = execute(
        dsn,
        "SELECT title, metadata, source, source_key, outline -> 'source' FROM pgrag.documents"
        " WHERE path = 'tables/tickets/2'",
    )
    assert doc[0] == "Invoice missing"
    assert doc[1] == {"customer": "globex", "priority": 2}
    assert doc[2:4] == ("table", {"id": 2})
    assert doc[4] == {"table": "tickets", "key": {"id": 2}, "source": "tickets"}


async def _everywhere(pool: object, provider: object, query: str, regex: str) -> list[set[str]]:
    """The paths each search mode finds."""
    return [
        paths(await search(pool, provider, regex if mode == "regex" else query, mode))
        for mode in MODES
    ]


async def _gone(dsn: str, pool: object, provider: object, path: str, word: str) -> bool:
    """No mode finds `word` in the document at `path` any more: keyword and regex find
    nothing there, and no chunk the vector legs rank holds it."""
    for mode, query in (("keyword", word), ("regex", word)):
        if path in paths(await search(pool, provider, query, mode)):
            return False
    return execute(
        dsn, "SELECT count(*) FROM pgrag.chunks WHERE content LIKE %s", (f"%{word}%",)
    ) == [(0,)]


async def test_insert_update_delete_key_change_and_truncate_follow(dsn: str) -> None:
    make_tickets(dsn)
    async with session(dsn) as (pool, provider):
        await service.add_source(pool, tickets_source())
        await sync(dsn, pool, provider)

        execute(
            dsn,
            "INSERT INTO tickets VALUES (4, 'Printer', 'Paper jam zq881 on floor 3', NULL, 'acme', 1)",
        )
        await sync(dsn, pool, provider)
        assert all(
            "tables/tickets/4" in p for p in await _everywhere(pool, provider, "zq881", "zq88[0-9]")
        )

        execute(dsn, "UPDATE tickets SET body = 'Toner empty xv552' WHERE id = 4")
        await sync(dsn, pool, provider)
        assert all(
            "tables/tickets/4" in p for p in await _everywhere(pool, provider, "xv552", "xv55[0-9]")
        )
        assert await _gone(dsn, pool, provider, "tables/tickets/4", "zq881")

        before = provider.passages
        execute(dsn, "UPDATE tickets SET views = views + 1")  # not an indexed column
        assert execute(dsn, "SELECT count(*) FROM pgrag.source_queue") == [(0,)]
        execute(dsn, "UPDATE tickets SET body = body || '  '")  # the same text once trimmed
        (written,) = await sync(dsn, pool, provider)
        assert (written.written, written.unchanged) == (0, 4)
        assert provider.passages == before  # zero embedding calls

        execute(dsn, "UPDATE tickets SET id = 40 WHERE id = 4")
        await sync(dsn, pool, provider)
        found = await _everywhere(pool, provider, "xv552", "xv55[0-9]")
        assert all("tables/tickets/40" in p for p in found)
        for mode, query in (("keyword", "xv552"), ("regex", "xv55[0-9]")):
            assert "tables/tickets/4" not in paths(await search(pool, provider, query, mode))

        execute(dsn, "DELETE FROM tickets WHERE id = 40")
        await sync(dsn, pool, provider)
        assert await _gone(dsn, pool, provider, "tables/tickets/40", "xv552")

        execute(dsn, "TRUNCATE tickets")
        execute(
            dsn, "INSERT INTO tickets VALUES (7, 'After', 'Fresh start kw7731', NULL, 'acme', 1)"
        )
        await sync(dsn, pool, provider)
        assert all(
            "tables/tickets/7" in p
            for p in await _everywhere(pool, provider, "kw7731", "kw77[0-9]+")
        )
        assert await _gone(dsn, pool, provider, "tables/tickets/1", "E1042")
        (info,) = await service.list_sources(pool)
        assert (info.rows_indexed, info.pending) == (1, 0)


async def test_hits_carry_their_row_and_metadata_filters_them(dsn: str) -> None:
    make_tickets(dsn)
    async with session(dsn) as (pool, provider):
        await service.add_source(pool, tickets_source())
        await sync(dsn, pool, provider)
        for mode in MODES:
            query = "[a-z]+" if mode == "regex" else "the"
            hits = await search(
                pool, provider, query, mode, filters={"metadata": {"customer": "acme"}}
            )
            assert paths(hits) == {"tables/tickets/1", "tables/tickets/3"}, mode
            hits = await search(pool, provider, query, mode, filters={"metadata": {"priority": 2}})
            assert paths(hits) == {"tables/tickets/2"}, mode
        (hit, *_) = await search(pool, provider, "E1042", "keyword")
        assert hit.source is not None
        assert (hit.source.table, hit.source.key, hit.source.source) == (
            "tickets",
            {"id": 1},
            "tickets",
        )


async def test_a_dropped_column_fails_its_source_and_others_go_on(dsn: str) -> None:
    make_tickets(dsn)
    execute(dsn, "CREATE TABLE faq (q_id bigint PRIMARY KEY, answer text)")
    execute(dsn, "INSERT INTO faq VALUES (1, 'Reset your password from the zz9914 page')")
    async with session(dsn) as (pool, provider):
        await service.add_source(pool, tickets_source())
        await service.add_source(pool, service.NewSource(table="faq", text_columns=["answer"]))
        await sync(dsn, pool, provider)
        execute(dsn, "ALTER TABLE tickets DROP COLUMN notes")
        execute(dsn, "UPDATE tickets SET body = 'changed' WHERE id = 1")
        execute(dsn, "INSERT INTO faq VALUES (2, 'Second answer qq4410')")
        done = {p.name: p for p in await sync(dsn, pool, provider)}
        assert "notes" in (done["tickets"].failure or "")
        assert done["faq"].failure is None and done["faq"].written == 1
        infos = {i.name: i for i in await service.list_sources(pool)}
        assert infos["tickets"].state == "failed" and "notes" in (infos["tickets"].failure or "")
        assert infos["faq"].state == "ready" and infos["faq"].rows_indexed == 2
        assert paths(await search(pool, provider, "qq4410", "keyword")) == {"tables/faq/2"}

        # added again with the columns it has now: in place, only changed text rewritten
        before = provider.passages
        info = await service.add_source(pool, tickets_source(text_columns=["body"]))
        assert info.state == "backfilling" and info.failure is None
        (done_t,) = await sync(dsn, pool, provider, "tickets")
        assert done_t.failure is None
        assert done_t.written == 2  # 1: its body changed; 2: its notes are no longer indexed
        assert provider.passages > before
        assert paths(await search(pool, provider, "changed", "keyword")) == {"tables/tickets/1"}


async def test_removing_a_source_drops_its_documents_and_triggers(dsn: str) -> None:
    make_tickets(dsn)
    async with session(dsn) as (pool, provider):
        await service.add_source(pool, tickets_source())
        await sync(dsn, pool, provider)
        await service.remove_source(pool, provider, source_settings(dsn), "tickets")
        assert await service.list_sources(pool) == []
    assert execute(dsn, "SELECT count(*) FROM pgrag.documents") == [(0,)]
    assert execute(dsn, "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'tickets'::regclass") == [
        (0,)
    ]
    assert execute(dsn, "SELECT count(*) FROM pgrag.table_sources") == [(0,)]


async def test_adding_without_trigger_rights_names_the_grant(dsn: str) -> None:
    make_tickets(dsn)
    execute(dsn, "DROP ROLE IF EXISTS pgrag_t_reader")
    execute(dsn, "CREATE ROLE pgrag_t_reader")
    execute(dsn, "GRANT SELECT ON tickets TO pgrag_t_reader")
    execute(dsn, "GRANT USAGE ON SCHEMA pgrag TO pgrag_t_reader")
    async with session(dsn) as (pool, _), pool.connection() as conn:
        await conn.execute("SET ROLE pgrag_t_reader")
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as raised:
            await conn.execute("SELECT pgrag.add_table_source('tickets', ARRAY['body'])")
        await conn.execute("RESET ROLE")
    assert raised.value.diag.message_primary == (
        "pgrag: cannot create triggers on tickets: GRANT TRIGGER ON TABLE tickets TO pgrag_t_reader"
    )
    execute(dsn, "DROP OWNED BY pgrag_t_reader")
    execute(dsn, "DROP ROLE pgrag_t_reader")
