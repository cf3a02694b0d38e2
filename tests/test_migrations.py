import asyncio
import subprocess

import psycopg
import pytest

from pgrag.db import migrations
from pgrag.db.database import prepare
from tests.conftest import pgrag_cmd

pytestmark = pytest.mark.anyio


def _tables(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'pgrag'"
        ).fetchall()
    return {r[0] for r in rows}


async def test_migrate_applies_every_file_once_and_twice_is_a_noop(empty_dsn: str) -> None:
    expected = migrations.discover()
    conn = await psycopg.AsyncConnection.connect(empty_dsn, autocommit=True)
    try:
        first = await migrations.migrate(conn)
        second = await migrations.migrate(conn)
        st = await migrations.status(conn)
    finally:
        await conn.close()
    assert [m.version for m in first] == [m.version for m in expected]
    assert second == []
    assert st.pending == [] and st.modified == []
    assert {
        "collections",
        "documents",
        "units",
        "sheet_rows",
        "chunks",
        "embeddings",
        "embedding_sets",
        "embedding_cache",
        "schema_migrations",
    } <= _tables(empty_dsn)


async def test_concurrent_migrations_do_not_race(empty_dsn: str) -> None:
    await asyncio.gather(*(prepare(empty_dsn) for _ in range(5)))
    with psycopg.connect(empty_dsn) as conn:
        rows = conn.execute(
            "SELECT version, count(*) FROM pgrag.schema_migrations GROUP BY 1"
        ).fetchall()
    assert len(rows) == len(migrations.discover())
    assert all(count == 1 for _, count in rows)


def test_concurrent_migrate_processes(empty_dsn: str) -> None:
    procs = [
        subprocess.Popen(
            pgrag_cmd("--database-url", empty_dsn, "migrate"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outputs
    applied_lines = sum(out.count("applied ") for out, _ in outputs)
    assert applied_lines == len(migrations.discover())  # each file applied by exactly one


async def test_changed_applied_file_is_reported(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE pgrag.schema_migrations SET checksum = 'x' WHERE version = 1")
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        st = await migrations.status(conn)
    finally:
        await conn.close()
    assert st.modified == [1]
