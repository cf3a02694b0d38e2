"""Set-up mistakes an operator makes, each answered in one line with a documented exit code
(docs/operations.md, "Exit codes"): no traceback, no INTERNAL, and the variable or package to fix."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from pgrag.db.server_check import pgvector_missing_message
from tests.support.commands import pgrag_cmd

MODEL = ["--embedding-model", "hash/384"]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGRAG_")}
    env.update(PGRAG_HOME=str(tmp_path / "home"), OMP_NUM_THREADS="1", **extra)
    return env


def _pgrag(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        pgrag_cmd(*MODEL, *args),
        capture_output=True,
        text=True,
        timeout=180,
        env=_env(tmp_path, **env),
    )


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "INTERNAL" not in proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    "url",
    [
        "not a connection string",
        "postgres://[::1",
        "foo=bar",
        "postgresql://pgrag@db.example:notaport/pgrag",
    ],
)
def test_a_malformed_database_url_names_the_variable_and_exits_2(tmp_path: Path, url: str) -> None:
    proc = _pgrag(tmp_path, "status", PGRAG_DATABASE_URL=url)
    assert proc.returncode == 2, proc.stderr
    line = _one_line(proc)
    assert line.startswith("pgrag: configuration error: PGRAG_DATABASE_URL:"), line


def test_a_malformed_database_url_does_not_echo_its_password(tmp_path: Path) -> None:
    proc = _pgrag(tmp_path, "status", PGRAG_DATABASE_URL="postgresql://u:s3cret pw@[::1/db")
    assert proc.returncode == 2, proc.stderr
    line = _one_line(proc)
    assert "PGRAG_DATABASE_URL" in line and "s3cret" not in line


LIMITED_ROLE = "pgrag_no_createrole"
LIMITED_PASSWORD = "pgrag-no-createrole-pw"


@pytest.fixture
def role_without_createrole(empty_dsn: str) -> Iterator[str]:
    """A DSN of a role that may create the schema but not roles (no pgrag_scoped for it)."""
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"DROP ROLE IF EXISTS {LIMITED_ROLE}")
        conn.execute(f"CREATE ROLE {LIMITED_ROLE} LOGIN NOCREATEROLE PASSWORD '{LIMITED_PASSWORD}'")
        conn.execute(f'GRANT CREATE ON DATABASE "{conn.info.dbname}" TO {LIMITED_ROLE}')
    try:
        yield make_conninfo(empty_dsn, user=LIMITED_ROLE, password=LIMITED_PASSWORD)
    finally:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {LIMITED_ROLE}")
            conn.execute(f"DROP ROLE {LIMITED_ROLE}")


def test_scoped_keys_on_a_role_without_createrole_stop_serve_in_one_line(
    tmp_path: Path, role_without_createrole: str
) -> None:
    proc = _pgrag(
        tmp_path,
        "serve",
        "--transport",
        "http",
        "--port",
        "1",  # never bound: serve stops before listening
        PGRAG_DATABASE_URL=role_without_createrole,
        PGRAG_API_KEYS="k-sales=sales",
    )
    assert proc.returncode == 2, proc.stderr
    line = _one_line(proc)
    assert line.startswith("pgrag: configuration error: PGRAG_API_KEYS"), line
    assert "pgrag_scoped" in line and "CREATEROLE" in line


def test_unscoped_keys_on_a_role_without_createrole_serve(
    tmp_path: Path, role_without_createrole: str
) -> None:
    """Only collection-limited keys need the role: the same set-up serves plain keys."""
    from tests.support.servers import free_port, wait_http

    port = free_port()
    proc = subprocess.Popen(
        pgrag_cmd(*MODEL, "serve", "--transport", "http", "--port", str(port)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path, PGRAG_DATABASE_URL=role_without_createrole, PGRAG_API_KEYS="k"),
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", timeout=90)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


@pytest.mark.parametrize(("num", "major"), [(150007, 15), (140012, 14), (170002, 17)])
def test_the_pgvector_hint_names_the_package_of_the_servers_major_version(
    num: int, major: int
) -> None:
    message = pgvector_missing_message(num)
    assert f"postgresql-{major}-pgvector" in message
    assert f"pgvector/pgvector:pg{major}" in message
    others = {14, 15, 16, 17, 18} - {major}
    assert not any(f"postgresql-{m}-pgvector" in message for m in others)


def test_the_pgvector_hint_of_a_real_server_names_its_version(server_dsn: str) -> None:
    with psycopg.connect(server_dsn) as conn:
        num = int(conn.execute("SHOW server_version_num").fetchone()[0])
    assert f"postgresql-{num // 10000}-pgvector" in pgvector_missing_message(num)


def test_doctor_on_a_fresh_embedded_home_notes_pending_migrations(tmp_path: Path) -> None:
    """`ingest` and `serve` apply pending migrations themselves: not a failure."""
    proc = _pgrag(tmp_path, "doctor")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert not [ln for ln in lines if ln.startswith("FAIL")], proc.stderr
    [note] = [ln for ln in lines if ln.startswith("note migrations:")]
    assert "pending" in note and "pgrag ingest" in note and "pgrag serve" in note
    assert "Traceback" not in proc.stderr


def test_doctor_fails_pending_migrations_this_user_cannot_apply(
    tmp_path: Path, empty_dsn: str
) -> None:
    role = "pgrag_doctor_readonly"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"DROP ROLE IF EXISTS {role}")
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pgrag-ro-pw'")
        conn.execute(f'REVOKE CREATE ON DATABASE "{conn.info.dbname}" FROM PUBLIC')
    try:
        dsn = make_conninfo(empty_dsn, user=role, password="pgrag-ro-pw")
        proc = _pgrag(tmp_path, "--database-url", dsn, "doctor")
    finally:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")
    assert proc.returncode == 1, proc.stderr
    [fail] = [ln for ln in proc.stderr.splitlines() if ln.startswith("FAIL")]
    assert fail.startswith("FAIL migrations:") and "pgrag migrate" in fail
