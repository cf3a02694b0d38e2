"""Checks that the server we talk to can run pgrag, before anything is written.

The minimums, each tied to what needs it (docs/existing-postgresql.md):
- PostgreSQL 15: the oldest release the community still supports (14 reached end of life
  in November 2026) and the oldest pgrag's tests run on (tests/support/pg15.py);
- pgvector 0.8.0: `hnsw.iterative_scan`, which every filtered or collection-limited
  semantic search sets so a filter cannot starve the result page (pgvector 0.7 fails
  those searches; it is refused, not degraded).
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from pgrag.db.migrations import MIGRATION_LOCK_KEY
from pgrag.db.one import scalar
from pgrag.errors import DATABASE_ROLE, DatabaseSetupError

MIN_SERVER_VERSION = 150000
MIN_SERVER_TEXT = "15"
MIN_PGVECTOR = (0, 8, 0)
MIN_PGVECTOR_TEXT = "0.8.0"

AVAILABLE_VECTOR_SQL = (
    "SELECT default_version, installed_version FROM pg_available_extensions WHERE name = 'vector'"
)


@dataclass(frozen=True)
class ServerInfo:
    server_version: str
    server_version_num: int
    pgvector_version: str


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def pgvector_missing_message(server_version_num: int) -> str:
    """The install hint for this server's major version: PGDG's package (Debian's own
    repositories have none) or pgvector's image, both per major version."""
    major = server_version_num // 10000
    return (
        f"the pgvector extension is not installed on this PostgreSQL {major} server: install "
        f"pgvector {MIN_PGVECTOR_TEXT} or newer (PGDG's apt repository: "
        f"postgresql-{major}-pgvector; or build it from source; or the pgvector/pgvector:pg{major} "
        "image), or unset PGRAG_DATABASE_URL to use the embedded PostgreSQL with pgvector"
    )


def pgvector_too_old_message(found: str, installed: bool) -> str:
    fix = (
        f"install pgvector {MIN_PGVECTOR_TEXT} or newer on the server, then a superuser or the "
        "extension's owner runs ALTER EXTENSION vector UPDATE; in this database"
        if installed
        else f"install pgvector {MIN_PGVECTOR_TEXT} or newer on the server"
    )
    return (
        f"pgvector {found} is too old: pgrag needs {MIN_PGVECTOR_TEXT} or newer "
        f"(hnsw.iterative_scan, for filtered semantic search); {fix}"
    )


def server_too_old_message(version: str) -> str:
    return (
        f"PostgreSQL {version} is too old: pgrag needs {MIN_SERVER_TEXT} or newer (the oldest "
        "release still supported upstream, and the oldest pgrag is tested on); upgrade the "
        "server, or unset PGRAG_DATABASE_URL to use the embedded PostgreSQL 18"
    )


async def ensure_server_ready(conn: psycopg.AsyncConnection) -> ServerInfo:
    """Verify versions and create the vector extension if allowed; explain how to fix it.
    Every refusal comes before anything is written (the extension is created only when
    the version it would get is new enough)."""
    num = int(await scalar(conn, "SHOW server_version_num"))
    version = await scalar(conn, "SHOW server_version")
    DATABASE_ROLE[0] = str(await scalar(conn, "SELECT current_user"))  # for the fixes' text
    if num < MIN_SERVER_VERSION:
        raise DatabaseSetupError(server_too_old_message(version))
    row = await (await conn.execute(AVAILABLE_VECTOR_SQL)).fetchone()
    if row is None:
        raise DatabaseSetupError(pgvector_missing_message(num))
    default_version, installed = row
    if _version_tuple(installed or default_version) < MIN_PGVECTOR:
        raise DatabaseSetupError(
            pgvector_too_old_message(installed or default_version, installed is not None)
        )
    if installed is None:
        try:
            async with conn.transaction():
                # the migrations' lock: concurrent starts would race on pg_extension
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
                await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.errors.InsufficientPrivilege as exc:
            raise DatabaseSetupError(
                "pgvector is installed on the server but not enabled in this database, and "
                "this role may not enable it (it is not a trusted extension): a superuser "
                "runs CREATE EXTENSION vector; in this database"
            ) from exc
        installed = default_version
    return ServerInfo(version, num, installed)
