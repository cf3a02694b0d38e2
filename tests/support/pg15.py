"""A second, real PostgreSQL for tests: Debian's PostgreSQL 15 with pgvector built from
../shared/vendor by scripts/pg15_pgvector.sh (0.8.6 in the system installation, 0.7.4 in a
private relocated copy for the refusal test). It runs as an unprivileged user on loopback
with password (scram) authentication only, the way a DBA's server does: no trust, no
superuser for pgrag.

Roles, created once per cluster:
- `postgres` (superuser, the DBA): creates databases and the `vector` extension (pgvector
  is not a trusted extension);
- `pgrag_owner`: owns each test database, runs `pgrag migrate --app-role`;
- `pgrag_app`: the application role, LOGIN and nothing else (no CREATEDB, CREATEROLE,
  superuser, nor CREATE on any database);
- `pgrag_admin`: CREATEROLE, to enable collection-limited keys after the first migration.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

SYSTEM_BIN = Path("/usr/lib/postgresql/15/bin")
ROOT = Path(os.environ.get("PGRAG_PG15_ROOT", "/var/tmp/pgrag-pg15"))
OLD_PGVECTOR_BIN = ROOT / "pgvector-0.7.4" / "lib" / "postgresql" / "15" / "bin"
RUN_AS = "postgres"  # created by Debian's postgresql-common
PASSWORDS = {
    "postgres": "dba-secret-7Qk",
    "pgrag_owner": "owner-secret-4Xv",
    "pgrag_app": "app-secret-9Lm",
    "pgrag_admin": "admin-secret-2Hd",
}
ROLES = {"pgrag_owner": "LOGIN", "pgrag_app": "LOGIN", "pgrag_admin": "LOGIN CREATEROLE"}


def available() -> bool:
    """scripts/test installed PostgreSQL 15 and built both pgvector versions for it."""
    return (SYSTEM_BIN / "postgres").exists() and all(
        (p / "lib" / "vector.so").exists() for p in (SYSTEM_BIN.parent, OLD_PGVECTOR_BIN.parent)
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_databases = itertools.count()


@dataclass
class Pg15:
    bin: Path
    base: Path
    port: int = 0

    @property
    def data(self) -> Path:
        return self.base / "data"

    def dsn(self, user: str = "postgres", dbname: str = "postgres") -> str:
        return make_conninfo(
            host="127.0.0.1",
            port=self.port,
            user=user,
            password=PASSWORDS[user],
            dbname=dbname,
        )

    def _run(self, tool: str, *args: str) -> None:
        creds: dict[str, object] = {}
        if os.geteuid() == 0:
            entry = pwd.getpwnam(RUN_AS)
            creds = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        proc = subprocess.run(
            [str(self.bin / tool), *args],
            capture_output=True,
            text=True,
            cwd=self.base,
            env={**os.environ, "LC_ALL": "C.UTF-8"},
            **creds,  # type: ignore[arg-type]
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)}: {proc.stdout}{proc.stderr}")

    def start(self) -> None:
        """initdb with scram for every TCP connection, start on loopback, create the roles."""
        self.base.mkdir(parents=True, exist_ok=True)
        pwfile = self.base / "pwfile"
        pwfile.write_text(PASSWORDS["postgres"] + "\n")
        if os.geteuid() == 0:
            entry = pwd.getpwnam(RUN_AS)
            for p in (self.base, pwfile):
                os.chown(p, entry.pw_uid, entry.pw_gid)
        os.chmod(pwfile, 0o600)
        self.port = _free_port()
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", f"--pwfile={pwfile}",
            "--auth-host=scram-sha-256", "--auth-local=scram-sha-256", "-E", "UTF8",
        )  # fmt: skip
        pwfile.unlink()
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.base}'\nmax_connections = 100\n"
                "shared_buffers = 64MB\nfsync = off\nsynchronous_commit = off\n"
                "full_page_writes = off\nlog_min_messages = warning\n"
            )
        log = str(self.base / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-l", log, "-w", "start")
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            for role, options in ROLES.items():
                conn.execute(
                    sql.SQL("CREATE ROLE {} {} PASSWORD {}").format(
                        sql.Identifier(role), sql.SQL(options), sql.Literal(PASSWORDS[role])
                    )
                )

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(RuntimeError):
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def create_database(self, *, owner: str = "pgrag_owner", vector: bool = True) -> str:
        """A new database owned by `owner`, with `vector` created by the DBA (a superuser:
        pgvector is not trusted); returns its name."""
        name = f"pgrag_pg15_{os.getpid()}_{next(_databases)}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" OWNER "{owner}"'.encode())
        if vector:
            with psycopg.connect(self.dsn(dbname=name), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION vector")
        return name

    def drop_database(self, name: str) -> None:
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


@contextlib.contextmanager
def pg15_server(bin_dir: Path = SYSTEM_BIN) -> Iterator[Pg15]:
    """A PostgreSQL 15 cluster in a temp dir for the block, stopped and removed after."""
    base = Path(tempfile.mkdtemp(prefix="pgrag-pg15-"))
    os.chmod(base, 0o755)
    server = Pg15(bin=bin_dir, base=base)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


def with_user(dsn: str, user: str, password: str) -> str:
    return make_conninfo(dsn, user=user, password=password)


def drop_scoped_role(server: Pg15) -> None:
    """Remove pgrag_scoped (cluster-wide) so the next test starts without it."""
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT datname FROM pg_database WHERE datallowconn AND datname <> 'template1'"
            ).fetchall()
        ]
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'pgrag_scoped'").fetchone():
            return
    for name in names:
        with psycopg.connect(server.dsn(dbname=name), autocommit=True) as conn:
            conn.execute("DROP OWNED BY pgrag_scoped")
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute("DROP ROLE pgrag_scoped")


def pgrag_as(
    dsn: str, *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """The `pgrag` command with the DSN in PGRAG_DATABASE_URL (never on a command line)
    and the hash embedder."""
    from tests.support.commands import pgrag_cmd
    from tests.support.kb_server import child_env

    return subprocess.run(
        pgrag_cmd("--embedding-model", "hash/384", *args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(PGRAG_DATABASE_URL=dsn, **(env or {})),
    )


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The single line a refused command prints (no traceback, nothing else)."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]
