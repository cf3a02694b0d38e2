"""Checks that the server we talk to can run pgrag (PG version, pgvector >= 0.7)."""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from pgrag.db.migrations import MIGRATION_LOCK_KEY
from pgrag.db.one import scalar
from pgrag.errors import DatabaseError

MIN_SERVER_VERSION = 140000
MIN_PGVECTOR = (0, 7)

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
    """The install hint for this server's major version: the PGDG package and image tags
    are per major version (postgresql-15-pgvector for a PostgreSQL 15 server)."""
    major = server_version_num // 10000
    return (
        f"the pgvector extension is not installed on this PostgreSQL {major} server: install "
        f"it (e.g. apt install postgresql-{major}-pgvector, or use the "
        f"pgvector/pgvector:pg{major} image) or unset PGRAG_DATABASE_URL to use the embedded "
        "PostgreSQL with pgvector."
    )


async def ensure_server_ready(conn: psycopg.AsyncConnection) -> ServerInfo:
    """Verify versions and create the vector extension if allowed; explain how to fix it."""
    num = int(await scalar(conn, "SHOW server_version_num"))
    version = await scalar(conn, "SHOW server_version")
    if num < MIN_SERVER_VERSION:
        raise DatabaseError(
            f"PostgreSQL {version} is too old: pgrag needs 14 or newer "
            "(unset PGRAG_DATABASE_URL to use the embedded PostgreSQL 18)."
        )
    row = await (await conn.execute(AVAILABLE_VECTOR_SQL)).fetchone()
    if row is None:
        raise DatabaseError(pgvector_missing_message(num))
    default_version, installed = row
    if installed is None:
        try:
            async with conn.transaction():
                # the migrations' lock: concurrent starts would race on pg_extension
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
                await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.errors.InsufficientPrivilege as exc:
            raise DatabaseError(
                "pgvector is available but not enabled and this user may not create it: "
                "ask a superuser to run CREATE EXTENSION vector; in this database."
            ) from exc
        installed = default_version
    if _version_tuple(installed) < MIN_PGVECTOR:
        raise DatabaseError(
            f"pgvector {installed} is too old: pgrag needs 0.7 or newer "
            "(ALTER EXTENSION vector UPDATE; after installing a newer pgvector)."
        )
    return ServerInfo(version, num, installed)
