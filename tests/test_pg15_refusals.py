"""Every privilege or version failure next to a DBA's PostgreSQL 15 is one line with a
stable code (DB_SETUP, never INTERNAL, never "retry") naming who must run what; exit 1
(README, exit codes). A too-old pgvector is refused before anything is written."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.commands import pgrag_cmd
from tests.support.kb_server import child_env, http_server
from tests.support.pg15 import (
    OLD_PGVECTOR_BIN,
    Pg15,
    drop_scoped_role,
    one_line,
    pg15_server,
    pgrag_as,
)


@pytest.fixture
def database(pg15: Pg15) -> Iterator[str]:
    name = pg15.create_database()
    yield name
    pg15.drop_database(name)
    drop_scoped_role(pg15)


def _refused(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert proc.returncode == 1, proc
    line = one_line(proc)
    assert line.startswith("pgrag: DB_SETUP: "), line
    assert "retry" not in line.lower(), line
    for needle in needles:
        assert needle in line, (needle, line)
    return line


def test_the_app_role_cannot_create_the_schema(pg15: Pg15, database: str, tmp_path: Path) -> None:
    app = pg15.dsn("pgrag_app", database)
    fix = "pgrag migrate --app-role pgrag_app"
    for command in (["migrate"], ["search", "anything"], ["ingest", str(tmp_path)]):
        _refused(pgrag_as(app, *command), "does not exist", "no CREATE on the database", fix)
    doctor = pgrag_as(app, "doctor")
    assert doctor.returncode == 1 and "INTERNAL" not in doctor.stderr, doctor.stderr
    assert re.search(r"FAIL migrations: .*pgrag migrate --app-role pgrag_app", doctor.stderr)
    with psycopg.connect(pg15.dsn(dbname=database)) as conn:  # nothing was written
        assert conn.execute("SELECT to_regnamespace('pgrag')").fetchone() == (None,)


def test_an_app_role_without_grants_or_behind_the_schema(pg15: Pg15, database: str) -> None:
    owner, app = pg15.dsn("pgrag_owner", database), pg15.dsn("pgrag_app", database)
    assert pgrag_as(owner, "migrate").returncode == 0  # no --app-role: nothing granted
    fix = "pgrag_owner (the schema's owner) runs `pgrag migrate --app-role pgrag_app`"
    _refused(pgrag_as(app, "search", "anything"), "has no access to the pgrag schema", fix)
    doctor = pgrag_as(app, "doctor")
    assert doctor.returncode == 1 and "INTERNAL" not in doctor.stderr, doctor.stderr
    with psycopg.connect(owner, autocommit=True) as conn:  # a DBA's read-only grant
        conn.execute("GRANT USAGE ON SCHEMA pgrag TO pgrag_admin")
        conn.execute("GRANT SELECT ON pgrag.documents TO pgrag_admin")
    assert pgrag_as(owner, "migrate", "--app-role", "pgrag_app").returncode == 0
    assert pgrag_as(app, "search", "anything").returncode == 0
    with psycopg.connect(pg15.dsn(dbname=database), autocommit=True) as conn:
        # later migrates re-grant the app roles they granted, and leave other grants alone
        writable = "SELECT has_table_privilege(%s, 'pgrag.chunks', 'INSERT')"
        assert conn.execute(writable, ("pgrag_admin",)).fetchone() == (False,)
        assert conn.execute(writable, ("pgrag_app",)).fetchone() == (True,)
        newest = conn.execute("SELECT max(version) FROM pgrag.schema_migrations").fetchone()[0]
        conn.execute("DELETE FROM pgrag.schema_migrations WHERE version = %s", (newest,))
        older = conn.execute("SELECT max(version) FROM pgrag.schema_migrations").fetchone()[0]
    _refused(
        pgrag_as(app, "search", "anything"),
        f"the pgrag schema is at version {older:04d}, this pgrag needs {newest:04d}",
        fix,
    )


def test_a_schema_a_dba_created_for_the_owner(pg15: Pg15) -> None:
    """The DBA keeps CREATE on the database: creates the schema for the owner and the
    extensions; the owner migrates without any database privilege."""
    name = pg15.create_database(owner="postgres")
    try:
        with psycopg.connect(pg15.dsn(dbname=name), autocommit=True) as conn:
            conn.execute("REVOKE CREATE ON DATABASE " + name + " FROM PUBLIC")
            conn.execute("CREATE EXTENSION pg_trgm")
            conn.execute("CREATE SCHEMA pgrag AUTHORIZATION pgrag_owner")
        done = pgrag_as(pg15.dsn("pgrag_owner", name), "migrate", "--app-role", "pgrag_app")
        assert done.returncode == 0, done.stderr
        assert pgrag_as(pg15.dsn("pgrag_app", name), "search", "anything").returncode == 0
    finally:
        pg15.drop_database(name)
        drop_scoped_role(pg15)


def test_vector_not_enabled_names_the_superuser_step(pg15: Pg15) -> None:
    name = pg15.create_database(vector=False)
    try:
        _refused(
            pgrag_as(pg15.dsn("pgrag_owner", name), "migrate"),
            "a superuser runs CREATE EXTENSION vector",
        )
    finally:
        pg15.drop_database(name)


@pytest.fixture(scope="module")
def old_pgvector() -> Iterator[Pg15]:
    """PostgreSQL 15 whose pgvector is 0.7.4 (a private copy of the installation)."""
    with pg15_server(OLD_PGVECTOR_BIN) as server:
        yield server


@pytest.mark.requires("pg15")
@pytest.mark.parametrize("enabled", [True, False])
def test_pgvector_0_7_is_refused_before_anything_is_written(
    old_pgvector: Pg15, enabled: bool
) -> None:
    name = old_pgvector.create_database(vector=enabled)
    owner = old_pgvector.dsn("pgrag_owner", name)
    try:
        _refused(pgrag_as(owner, "migrate"), "pgvector 0.7.4 is too old", "needs 0.8.0")
        if enabled:  # every command checks the same way; doctor says it as a failed check
            _refused(pgrag_as(owner, "search", "x"), "pgvector 0.7.4 is too old", "needs 0.8.0")
            doctor = pgrag_as(owner, "doctor")
            assert doctor.returncode == 1 and "Traceback" not in doctor.stderr, doctor.stderr
            assert "FAIL pgvector: pgvector 0.7.4 is too old" in doctor.stderr, doctor.stderr
        with psycopg.connect(old_pgvector.dsn(dbname=name)) as conn:
            assert conn.execute("SELECT to_regnamespace('pgrag')").fetchone() == (None,)
            versions = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            assert versions.fetchall() == ([("0.7.4",)] if enabled else [])
    finally:
        old_pgvector.drop_database(name)


def _cmdlines() -> list[str]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                out.append(Path("/proc", pid, "cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                continue
    return out


def test_pgrag_psql_keeps_the_password_off_every_command_line(pg15: Pg15, database: str) -> None:
    owner = pg15.dsn("pgrag_owner", database)
    password = "owner-secret-4Xv"
    assert password in owner
    proc = subprocess.Popen(
        pgrag_cmd("psql", "-X", "-c", "SELECT pg_sleep(4)"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(PGRAG_DATABASE_URL=owner),
    )
    seen_psql, leaks = False, []
    while proc.poll() is None:
        lines = _cmdlines()
        seen_psql = seen_psql or any("psql" in c and "pg_sleep" in c for c in lines)
        leaks += [c for c in lines if password in c]
        time.sleep(0.05)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert seen_psql and "pg_sleep" in out
    assert leaks == []


async def _mcp_search(url: str) -> dict[str, Any]:
    async with (
        httpx2.AsyncClient(timeout=60) as hc,
        Client(streamable_http_client(url, http_client=hc)) as client,
    ):
        result = await client.call_tool("search", {"query": "zebras", "mode": "keyword"})
    assert result.is_error, result
    return dict(result.structured_content or {})


def test_a_grant_revoked_under_a_running_server(pg15: Pg15, database: str, tmp_path: Path) -> None:
    """REST and MCP answer DB_SETUP naming the fix (no Retry-After, no "retry"), and the
    server logs each failure once, without a traceback; any other database error is logged
    with one traceback, not two (Starlette re-raised what its catch-all handler answered)."""
    owner, app = pg15.dsn("pgrag_owner", database), pg15.dsn("pgrag_app", database)
    assert pgrag_as(owner, "migrate", "--app-role", "pgrag_app").returncode == 0
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "zebra.md").write_text("# Zebras\n\nZebras graze in herds.\n")
    assert pgrag_as(app, "ingest", "-q", "-c", "alpha", str(tmp_path / "docs")).returncode == 0
    log = tmp_path / "server.log"
    with http_server(app, "--embedding-model", "hash/384", log_path=log) as server:
        with psycopg.connect(owner, autocommit=True) as conn:
            conn.execute("ALTER FUNCTION pgrag.regex_search RENAME TO regex_search_gone")
        broken = httpx2.get(f"{server.base}/api/search", params={"q": "zebra", "mode": "regex"})
        assert (broken.status_code, broken.json()["errorCode"]) == (503, "DB_ERROR"), broken
        with psycopg.connect(owner, autocommit=True) as conn:
            conn.execute("REVOKE SELECT ON pgrag.chunks FROM pgrag_app")
        r = httpx2.get(f"{server.base}/api/search", params={"q": "zebras", "mode": "keyword"})
        mcp = asyncio.run(_mcp_search(server.mcp_url))
    body = r.json()
    assert (r.status_code, body["errorCode"]) == (500, "DB_SETUP"), body
    assert "Retry-After" not in r.headers
    for message in (body["errorMessage"], mcp["error"]["message"]):
        assert "permission denied for table chunks" in message, message
        assert "pgrag migrate --app-role pgrag_app" in message and "retry" not in message
    assert mcp["error"]["code"] == "DB_SETUP", mcp
    text = log.read_text()
    assert text.count("Traceback") == 1 and "regex_search" in text, text  # the DB_ERROR's
    assert text.count("permission denied for table chunks") == 2, text  # one line each
