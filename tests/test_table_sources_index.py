"""A large backfill builds its collection's vector index once at its end (real PostgreSQL,
real triggers): dropped before the rows' vectors go in, built after, used by search; kept
when the backfill is small or the collection already larger; rebuilt by the next drain when
a process stopped before building it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pgrag.doctor import run_checks
from pgrag.ingest import table_sync
from pgrag.services import table_sources as service
from pgrag.settings import load_settings
from tests.support.table_sources import execute, make_tickets, search, session, tickets_source

pytestmark = pytest.mark.anyio

ROWS_SQL = """
INSERT INTO {table} (id, subject, body, customer, priority)
SELECT g, 'Ticket ' || g, 'Printer error E' || g || ' on floor ' || (g %% 9), 'acme', 1
FROM generate_series(%s::int, %s::int) g
"""
INDEX_SQL = """
SELECT c.oid::bigint, i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
WHERE c.relname = (SELECT 'embeddings_hnsw_' || active_set_id FROM pgrag.collections
                   WHERE name = 'default')
"""


def index(dsn: str) -> tuple[int, bool] | None:
    """(oid, valid) of the default collection's vector index; None: there is none."""
    rows = execute(dsn, INDEX_SQL)
    return rows[0] if rows else None


def settings(dsn: str) -> Any:
    return load_settings(database_url=dsn, embedding_model="hash/384", backfill_index_rows=100)


async def test_a_large_backfill_builds_the_index_once_at_its_end(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(table_sync, "BACKFILL_STEP", 50)  # several steps to look in on
    make_tickets(dsn, [])
    execute(dsn, ROWS_SQL.format(table="tickets"), (1, 300))
    seen: list[tuple[int, bool] | None] = []
    async with session(dsn) as (pool, provider):
        await service.add_source(pool, tickets_source(text_columns=["body"]))
        (done,) = await service.sync(
            pool, provider, settings(dsn), None, lambda _: seen.append(index(dsn))
        )
        assert (done.written, done.failure) == (300, None)
        assert len(seen) >= 6 and set(seen) == {None}  # no index while the vectors went in
        built = index(dsn)
        assert built is not None and built[1]  # built once, at the end, valid
        (info,) = await service.list_sources(pool)
        assert (info.rows_indexed, info.pending) == (300, 0)
        hits = await search(pool, provider, "Printer error E250 on floor 7", "semantic", limit=3)
        assert hits and hits[0].source is not None and hits[0].source.key == {"id": 250}
        # a backfill smaller than the collection: its vectors go into the index there is
        execute(dsn, "CREATE TABLE more (LIKE tickets INCLUDING ALL)")
        execute(dsn, ROWS_SQL.format(table="more"), (1001, 1150))
        await service.add_source(pool, tickets_source(table="more", text_columns=["body"]))
        seen.clear()
        done_all = await service.sync(
            pool, provider, settings(dsn), None, lambda _: seen.append(index(dsn))
        )
        assert {p.name: p.written for p in done_all} == {"more": 150, "tickets": 0}
        assert set(seen) == {built} and index(dsn) == built
    assert execute(
        dsn, "SELECT count(*) FROM pgrag.embeddings e JOIN pgrag.collections c"
        " ON c.active_set_id = e.set_id WHERE c.name = 'default'",
    ) == [(450,)]  # fmt: skip


async def test_a_small_backfill_keeps_the_index(dsn: str) -> None:
    make_tickets(dsn, [])
    execute(dsn, ROWS_SQL.format(table="tickets"), (1, 60))
    async with session(dsn) as (pool, provider):
        await service.add_source(pool, tickets_source(text_columns=["body"]))
        (done,) = await service.sync(pool, provider, settings(dsn))
        assert done.written == 60
        first = index(dsn)
        assert first is not None and first[1]
        execute(dsn, ROWS_SQL.format(table="tickets"), (61, 260))  # changes, not a backfill
        (done,) = await service.sync(pool, provider, settings(dsn))
        assert done.written == 200 and index(dsn) == first


async def test_a_missing_index_is_built_by_the_next_drain(dsn: str, tmp_path: Path) -> None:
    """A process stopped between the backfill and the build (or during a concurrent build,
    which leaves an invalid index): the next drain builds it, with nothing queued."""
    make_tickets(dsn, [])
    execute(dsn, ROWS_SQL.format(table="tickets"), (1, 40))
    async with session(dsn) as (pool, provider):
        await service.add_source(pool, tickets_source(text_columns=["body"]))
        await service.sync(pool, provider, settings(dsn))
        ((set_id,),) = execute(dsn, "SELECT active_set_id FROM pgrag.collections")
        execute(dsn, f"DROP INDEX pgrag.embeddings_hnsw_{set_id}")
        assert index(dsn) is None
        overrides = {"home": tmp_path, "database_url": dsn, "embedding_model": "hash/384"}
        said = {c.name: c for c in await run_checks(overrides)}["vector index default"]
        assert not said.ok and f"pgrag.ensure_embedding_index({set_id})" in said.detail
        (done,) = await service.sync(pool, provider, settings(dsn))
        assert done.written == 0
        rebuilt = index(dsn)
        assert rebuilt is not None and rebuilt[1]
        assert "vector index default" not in {c.name for c in await run_checks(overrides)}
        # what a concurrent build killed midway leaves: an index marked invalid
        execute(dsn, "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s", (rebuilt[0],))
        await service.sync(pool, provider, settings(dsn))
        again = index(dsn)
        assert again is not None and again[1] and again[0] != rebuilt[0]


async def test_a_parallel_build_short_of_shared_memory_is_done_by_one_process(dsn: str) -> None:
    """A parallel build asks for its maintenance_work_mem as one shared memory segment (a
    container's /dev/shm is often 64 MB): refused, the build is done again in one process,
    whose graph takes memory as it grows."""
    make_tickets(dsn, [])
    execute(dsn, ROWS_SQL.format(table="tickets"), (1, 40))
    execute(dsn, "ALTER TABLE pgrag.embeddings SET (parallel_workers = 2)")  # even this small
    huge = load_settings(
        database_url=dsn, embedding_model="hash/384", index_build_memory="1000GB"
    )  # no /dev/shm holds it
    async with session(dsn) as (pool, provider):
        await service.add_source(pool, tickets_source(text_columns=["body"]))
        await service.sync(pool, provider, settings(dsn))
        ((set_id,),) = execute(dsn, "SELECT active_set_id FROM pgrag.collections")
        execute(dsn, f"DROP INDEX pgrag.embeddings_hnsw_{set_id}")
        await service.sync(pool, provider, huge)
        rebuilt = index(dsn)
        assert rebuilt is not None and rebuilt[1]
