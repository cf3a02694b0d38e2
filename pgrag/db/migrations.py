"""The schema: ordered migrations (DDL, applied once each) and repeatable function files.

sql/migrations/NNNN_name.sql hold tables, indexes, row-level security, roles and the few
functions generated columns, policies and triggers depend on; each is applied once, in its
own transaction, and recorded in pgrag.schema_migrations. sql/functions/*.sql hold every
other function, each defined once: when any of those files changes, they are all
re-applied in one transaction after dropping the functions they own, so a fresh database
and an upgraded one end with the same definitions. Both steps run under one advisory lock.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg

from pgrag.db import distributed as distribution
from pgrag.db.languages import detect_missing_languages
from pgrag.db.one import scalar

MIGRATION_LOCK_KEY = 0x70677261_67000001  # "pgrag" + 1: one lock for every pgrag database
FILE_PATTERN = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

# only when missing: CREATE SCHEMA IF NOT EXISTS checks CREATE on the database first, which
# the owner of a schema a DBA created for it need not have
CREATE_SCHEMA_SQL = "CREATE SCHEMA IF NOT EXISTS pgrag"
SCHEMA_EXISTS_SQL = "SELECT to_regnamespace('pgrag') IS NOT NULL"
CREATE_TABLE_SQL = """
CREATE TABLE IF NOT EXISTS pgrag.schema_migrations (
    version    int PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS pgrag.schema_functions (
    file       text PRIMARY KEY,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
APPLIED_SQL = "SELECT version, checksum FROM pgrag.schema_migrations ORDER BY version"
RECORD_SQL = "INSERT INTO pgrag.schema_migrations (version, name, checksum) VALUES (%s, %s, %s)"
TABLE_EXISTS_SQL = "SELECT to_regclass('pgrag.schema_migrations') IS NOT NULL"
FUNCTIONS_APPLIED_SQL = "SELECT file, checksum FROM pgrag.schema_functions"
FUNCTIONS_TABLE_EXISTS_SQL = "SELECT to_regclass('pgrag.schema_functions') IS NOT NULL"
# every plain function of the schema but those the migrations define (kept: generated
# columns, policies and triggers depend on them) and the trigger function generated for
# each table source (81_table_source_triggers.sql regenerates them)
OWNED_FUNCTIONS_SQL = """
SELECT p.oid::regprocedure::text FROM pg_proc p
WHERE p.pronamespace = 'pgrag'::regnamespace AND p.prokind = 'f' AND NOT (p.proname = ANY (%s))
  AND p.proname !~ '^table_source_changed_[0-9]+$'
"""
DEFINED_FUNCTION = re.compile(r"CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+pgrag\.(\w+)", re.I)
FUNCTION_FILE = re.compile(r"^(\d{2})_([a-z0-9_]+)\.sql$")

# Files rewritten without changing their DDL when functions moved to sql/functions/: a
# database that applied the old text is up to date (its recorded checksum is refreshed).
RESHAPED = {
    1: "4efdb5ddd2b672d2d87503326d332029e545d2d136d2bd3d8ff49386bc90e375",
    3: "ccfcebd8586a7d03d2d1ff067f75ba2954465f6efbeef1990faf1fc35779e976",
    9: "cc62ac8d1445c0b1b0451d903dd51c56d06586355406836d293a7111b9c31ae8",
}


class SqlFile:
    """A file of SQL the runner applies, recognised later by its checksum."""

    path: Path

    @property
    def sql(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class Migration(SqlFile):
    version: int
    name: str
    path: Path


def _sql_dir(name: str) -> Path:
    """Packaged copy in a wheel, else the repository's sql/<name> (editable installs)."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "_sql" / name
    return packaged if packaged.is_dir() else here.parent / "sql" / name


def migrations_dir() -> Path:
    return _sql_dir("migrations")


def functions_dir() -> Path:
    return _sql_dir("functions")


@dataclass(frozen=True)
class FunctionFile(SqlFile):
    name: str
    path: Path


def discover_functions(directory: Path | None = None) -> list[FunctionFile]:
    found = []
    for path in sorted((directory or functions_dir()).glob("*.sql")):
        if FUNCTION_FILE.match(path.name) is None:
            raise ValueError(f"function file {path.name} is not named NN_name.sql")
        found.append(FunctionFile(path.name, path))
    return found


def migration_functions(directory: Path | None = None) -> set[str]:
    """Names of the functions the migrations define (never dropped by apply_functions)."""
    return {name for m in discover(directory) for name in DEFINED_FUNCTION.findall(m.sql)}


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
    functions_changed: list[str]  # function files not applied in their current version


async def status(conn: psycopg.AsyncConnection) -> MigrationStatus:
    exists = await scalar(conn, TABLE_EXISTS_SQL)
    applied: dict[int, str] = (
        dict(await (await conn.execute(APPLIED_SQL)).fetchall()) if exists else {}
    )
    all_ = discover()
    functions_exist = await scalar(conn, FUNCTIONS_TABLE_EXISTS_SQL)
    functions: dict[str, str] = (
        dict(await (await conn.execute(FUNCTIONS_APPLIED_SQL)).fetchall())
        if functions_exist
        else {}
    )
    current = {f.name: f.checksum for f in discover_functions()}
    return MigrationStatus(
        applied=sorted(applied),
        pending=[m for m in all_ if m.version not in applied],
        modified=[
            m.version for m in all_ if m.version in applied and applied[m.version] != m.checksum
        ],
        functions_changed=sorted(
            name
            for name in current.keys() | functions.keys()
            if current.get(name) != functions.get(name)
        ),
    )


async def migrate(
    conn: psycopg.AsyncConnection, *, distributed: bool | None = None
) -> list[Migration]:
    """Apply pending migrations, then changed function files, then the distributed mode
    when Citus is there (`distributed`: PGRAG_DISTRIBUTED, None detects); safe to call
    from many processes at once."""
    assert conn.autocommit, "migrate() manages its own transactions"
    await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
    try:
        async with conn.transaction():
            if not await scalar(conn, SCHEMA_EXISTS_SQL):
                await conn.execute(CREATE_SCHEMA_SQL)
            await conn.execute(CREATE_TABLE_SQL)
            for version, old in RESHAPED.items():
                await conn.execute(
                    "UPDATE pgrag.schema_migrations SET checksum = %s"
                    " WHERE version = %s AND checksum = %s",
                    (_checksum_of(version), version, old),
                )
        done = []
        for migration in (await status(conn)).pending:
            async with conn.transaction():
                await conn.execute(_runnable(migration).encode())
                await conn.execute(
                    RECORD_SQL, (migration.version, migration.name, migration.checksum)
                )
            done.append(migration)
        await apply_functions(conn)
        await detect_missing_languages(conn)
        await distribution.apply(conn, distributed)
        return done
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))


def _runnable(migration: Migration) -> str:
    """The text to run: 0001's own CREATE SCHEMA IF NOT EXISTS goes (the runner created the
    schema or found it), as it would check CREATE on the database even when it exists."""
    if migration.version == 1:
        return migration.sql.replace("CREATE SCHEMA IF NOT EXISTS pgrag;", "", 1)
    return migration.sql


def _checksum_of(version: int) -> str:
    return next(m.checksum for m in discover() if m.version == version)


async def apply_functions(conn: psycopg.AsyncConnection) -> list[FunctionFile]:
    """Re-create every function of sql/functions/ when any file changed (one transaction,
    under the caller's migration lock): drop the functions the files own, then run the
    files in name order. Dropping first lets a signature change or a removed function
    leave nothing behind. Returns the files applied ([] when all were current)."""
    files = discover_functions()
    if not (await status(conn)).functions_changed:
        return []
    async with conn.transaction():
        keep = sorted(migration_functions())
        owned = await (await conn.execute(OWNED_FUNCTIONS_SQL, (keep,))).fetchall()
        if owned:  # regprocedure text from the catalogue, quoted by it; one statement, so
            # that a function another one depends on (an argument's DEFAULT) drops with it
            signatures = ", ".join(signature for (signature,) in owned)
            await conn.execute(f"DROP FUNCTION {signatures}".encode())
        for f in files:
            await conn.execute(f.sql.encode())
        await conn.execute("DELETE FROM pgrag.schema_functions")
        for f in files:
            await conn.execute(
                "INSERT INTO pgrag.schema_functions (file, checksum) VALUES (%s, %s)",
                (f.name, f.checksum),
            )
    return files
