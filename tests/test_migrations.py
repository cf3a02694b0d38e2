import asyncio
import hashlib
import subprocess
from pathlib import Path

import psycopg
import pytest

from pgrag.db import migrations
from pgrag.db.database import prepare
from tests.support.commands import pgrag_cmd

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


# ----------------------------------------------------------- repeatable function files

SCHEMA_0015 = Path(__file__).parent / "fixtures" / "schema_0015.sql"
FUNCTIONS_SQL = """
SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid)
FROM pg_proc p WHERE p.pronamespace = 'pgrag'::regnamespace
"""


def _functions(dsn: str) -> dict[str, str]:
    with psycopg.connect(dsn) as conn:
        return dict(conn.execute(FUNCTIONS_SQL).fetchall())


async def _migrate(dsn: str) -> list[migrations.Migration]:
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        return await migrations.migrate(conn)
    finally:
        await conn.close()


async def _status(dsn: str) -> migrations.MigrationStatus:
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        return await migrations.status(conn)
    finally:
        await conn.close()


async def test_an_upgraded_database_ends_with_the_fresh_functions(dsn: str, empty_dsn: str) -> None:
    """A database on the last schema whose migrations defined every function (0001-0015)
    upgrades to exactly the definitions a fresh database gets: same functions, same
    pg_get_functiondef text, nothing left over, and no migration reported changed."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        conn.execute(SCHEMA_0015.read_bytes())
    before = _functions(empty_dsn)
    assert "pgrag.hybrid_search_detail(text,vector,integer,bigint[],jsonb,integer," in "".join(
        before
    )
    every_file = sorted(f.name for f in migrations.discover_functions())
    assert (await _status(empty_dsn)).functions_changed == every_file

    applied = await _migrate(empty_dsn)  # the DDL added since 0015, then the function files
    assert [m.version for m in applied] == [
        m.version for m in migrations.discover()[-len(applied) :]
    ]
    assert all(m.version > 15 for m in applied)
    fresh, upgraded = _functions(dsn), _functions(empty_dsn)
    assert sorted(upgraded) == sorted(fresh)
    assert [name for name in fresh if fresh[name] != upgraded[name]] == []
    st = await _status(empty_dsn)
    assert st.modified == [] and st.pending == [] and st.functions_changed == []


async def test_a_changed_function_file_is_reapplied_and_leftovers_dropped(dsn: str) -> None:
    fresh = _functions(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE FUNCTION pgrag.removed_since() RETURNS int LANGUAGE sql AS 'SELECT 1'")
        conn.execute(
            "CREATE OR REPLACE FUNCTION pgrag.check_fusion(fusion text) RETURNS text "
            "LANGUAGE sql AS 'SELECT ''tampered'''"
        )
    assert (await _status(dsn)).functions_changed == []  # the files did not change...
    assert await _migrate(dsn) == [] and _functions(dsn) != fresh  # ...so nothing runs

    with psycopg.connect(dsn, autocommit=True) as conn:  # as if 40_hybrid.sql changed
        conn.execute(
            "UPDATE pgrag.schema_functions SET checksum = 'old' WHERE file = %s", ("40_hybrid.sql",)
        )
    assert (await _status(dsn)).functions_changed == ["40_hybrid.sql"]
    await _migrate(dsn)
    assert _functions(dsn) == fresh  # re-created from the files, the stray function gone
    assert (await _status(dsn)).functions_changed == []


def test_each_function_is_defined_once_and_migrations_keep_only_what_ddl_needs() -> None:
    defined: dict[str, list[str]] = {}
    for f in migrations.discover_functions():
        for name in migrations.DEFINED_FUNCTION.findall(f.sql):
            defined.setdefault(name, []).append(f.name)
    overloads = {"semantic_leg_sql"}  # (set, dims) and (set, dims, filtered)
    twice = {n: files for n, files in defined.items() if len(files) > 1 and n not in overloads}
    assert twice == {}
    kept = migrations.migration_functions()
    assert kept == {
        "cjk_bigrams",  # lexical_text -> chunk_tsv -> the generated column chunks.tsv
        "lexical_text",
        "chunk_tsv",
        "graph_properties_text",  # graph_nodes.tsv
        "collection_in_scope",  # row-level security policies
        "notify_documents_changed",  # the documents trigger
        "embedding_lang",  # triggers on embeddings: languages and their vector sums
        "language_sums_added",
        "language_sums_removed",
        "vector_negate",
        "bm25_sums_added",  # triggers on chunks: BM25's per-collection sums
        "bm25_sums_removed",
        "bm25_sums_updated",
        "table_source_changed",  # the triggers on the user's source tables
    }
    assert kept.isdisjoint(defined)


def test_released_migrations_are_append_only() -> None:
    """A migration on main may never change (databases recorded its checksum): a change of
    schema is a new file, listed in sql/migrations/SHA256SUMS with the same commit."""
    folder = Path(__file__).resolve().parents[1] / "sql" / "migrations"
    released = dict(
        reversed(line.split()) for line in (folder / "SHA256SUMS").read_text().splitlines()
    )
    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.glob("*.sql")}
    changed = sorted(name for name, digest in released.items() if files.get(name) != digest)
    assert not changed, f"released migrations were edited or removed: {changed}"
    unlisted = sorted(files.keys() - released.keys())
    assert not unlisted, (
        f"new migrations not listed in sql/migrations/SHA256SUMS: {unlisted}; "
        "append them: (cd sql/migrations && sha256sum NEW.sql >> SHA256SUMS)"
    )
