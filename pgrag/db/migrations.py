"""Ordered SQL migrations: applied once each, in a transaction, under an advisory lock."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg

MIGRATION_LOCK_KEY = 0x70677261_67000001  # "pgrag" + 1: one lock for every pgrag database
FILE_PATTERN = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

CREATE_TABLE_SQL = """
CREATE SCHEMA IF NOT EXISTS pgrag;
CREATE TABLE IF NOT EXISTS pgrag.schema_migrations (
    version    int PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
APPLIED_SQL = "SELECT version, checksum FROM pgrag.schema_migrations ORDER BY version"
RECORD_SQL = "INSERT INTO pgrag.schema_migrations (version, name, checksum) VALUES (%s, %s, %s)"
TABLE_EXISTS_SQL = "SELECT to_regclass('pgrag.schema_migrations') IS NOT NULL"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path

    @property
    def sql(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def migrations_dir() -> Path:
    """Packaged copy in a wheel, else the repository's sql/migrations (editable installs)."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "_sql" / "migrations"
    return packaged if packaged.is_dir() else here.parent / "sql" / "migrations"


def discover(directory: Path | None = None) -> list[Migration]:
    found = []
    for path in sorted((directory or migrations_dir()).glob("*.sql")):
        m = FILE_PATTERN.match(path.name)
        if m is None:
            raise ValueError(f"migration file {path.name} is not named NNNN_name.sql")
        found.append(Migration(int(m.group(1)), m.group(2), path))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise ValueError("two migration files share a version number")
    return found


@dataclass(frozen=True)
class MigrationStatus:
    applied: list[int]
    pending: list[Migration]
    modified: list[int]  # applied, but the file changed since


async def status(conn: psycopg.AsyncConnection) -> MigrationStatus:
    exists = (await (await conn.execute(TABLE_EXISTS_SQL)).fetchone())[0]
    applied = dict(await (await conn.execute(APPLIED_SQL)).fetchall()) if exists else {}
    all_ = discover()
    return MigrationStatus(
        applied=sorted(applied),
        pending=[m for m in all_ if m.version not in applied],
        modified=[
            m.version for m in all_ if m.version in applied and applied[m.version] != m.checksum
        ],
    )


async def migrate(conn: psycopg.AsyncConnection) -> list[Migration]:
    """Apply pending migrations; safe to call from many processes at once."""
    assert conn.autocommit, "migrate() manages its own transactions"
    await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
    try:
        async with conn.transaction():
            await conn.execute(CREATE_TABLE_SQL)
        done = []
        for migration in (await status(conn)).pending:
            async with conn.transaction():
                await conn.execute(migration.sql.encode())
                await conn.execute(
                    RECORD_SQL, (migration.version, migration.name, migration.checksum)
                )
            done.append(migration)
        return done
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
