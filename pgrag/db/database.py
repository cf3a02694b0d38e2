"""Opening the database: resolve the DSN, check the server, migrate, open the pool."""

from __future__ import annotations

import contextlib
import logging
import time
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg_pool import AsyncConnectionPool

from pgrag.config.database import DatabaseSettings
from pgrag.db import backend_cpu, migrations, roles
from pgrag.db.embedded import start_embedded
from pgrag.db.roles import RoleReport
from pgrag.db.server_check import ServerInfo, ensure_server_ready
from pgrag.errors import DatabaseError, DatabaseSetupError

log = logging.getLogger(__name__)


def resolve_dsn(settings: DatabaseSettings) -> str:
    """The configured DSN, or the embedded cluster's (started on demand)."""
    if settings.database_url:
        return settings.database_url
    return start_embedded(settings.home)


async def connect(dsn: str) -> psycopg.AsyncConnection:
    try:
        return await psycopg.AsyncConnection.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatabaseError(
            f"cannot connect to PostgreSQL: {reason}. Check PGRAG_DATABASE_URL "
            "(host, port, user, password, database) or unset it to use the embedded database."
        ) from exc


async def prepare(
    dsn: str, *, run_migrations: bool = True, distributed: bool | None = None
) -> ServerInfo:
    """Check the server and bring the schema up to date (`distributed`: PGRAG_DISTRIBUTED);
    a role that may not migrate checks that the schema is current instead."""
    conn = await connect(dsn)
    try:
        info = await ensure_server_ready(conn)
        if run_migrations:
            report = await up_to_date(conn, distributed=distributed)
            for note in report.notes if report else []:
                log.info("%s", note)  # the migrate command prints them
        return info
    finally:
        await conn.close()


async def up_to_date(
    conn: psycopg.AsyncConnection, *, distributed: bool | None, app_role: str | None = None
) -> RoleReport | None:
    """Migrate and grant (roles.apply_roles) when this role may migrate, else check the
    schema is current and granted to it (None). Privileges a migration lacks are one line
    naming who must run what."""
    if not await roles.may_migrate(conn):
        await roles.check_schema(conn)
        return None
    try:
        applied = await migrations.migrate(conn, distributed=distributed)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise migration_refused(exc) from exc
    report = await roles.apply_roles(conn, app_role)
    report.applied = applied
    return report


def migration_refused(exc: psycopg.errors.InsufficientPrivilege) -> DatabaseSetupError:
    reason = (exc.diag.message_primary or str(exc)).splitlines()[0]
    fix = (
        "a superuser runs CREATE EXTENSION vector; CREATE EXTENSION pg_trgm; in this database"
        if "extension" in reason
        else "run `pgrag migrate --app-role <app role>` as the database's owner or a DBA"
    )
    return DatabaseSetupError(f"migrating the pgrag schema was refused: {reason}; {fix}")


async def _configure(conn: psycopg.AsyncConnection) -> None:
    await register_vector_async(conn)


RECHECK_AFTER_IDLE_S = 2.0
_returned_at: weakref.WeakKeyDictionary[psycopg.AsyncConnection, float] = (
    weakref.WeakKeyDictionary()
)


async def _returned(conn: psycopg.AsyncConnection) -> None:
    _returned_at[conn] = time.monotonic()
    backend_cpu.returned(conn)


async def _check_if_idle(conn: psycopg.AsyncConnection) -> None:
    """Probe a connection before handing it out only if it sat idle: one that came back
    healthy a moment ago needs no round trip (three per search under load), while one
    left over from before a database restart is still replaced before anyone gets it."""
    returned = _returned_at.get(conn)
    if returned is None or time.monotonic() - returned > RECHECK_AFTER_IDLE_S:
        await AsyncConnectionPool.check_connection(conn)
    backend_cpu.taken(conn)  # the check runs in the task that takes the connection


@dataclass
class Database:
    dsn: str
    pool: AsyncConnectionPool
    server: ServerInfo


@contextlib.asynccontextmanager
async def open_database(
    settings: DatabaseSettings, *, min_size: int = 1, max_size: int = 10, dsn: str | None = None
) -> AsyncIterator[Database]:
    dsn = dsn or resolve_dsn(settings)
    info = await prepare(dsn, distributed=settings.distributed)
    pool = AsyncConnectionPool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        open=False,
        configure=_configure,
        kwargs={"autocommit": True},
        # a bounded wait for a free connection, then a clean TIMEOUT for the caller
        timeout=10,
        check=_check_if_idle,
        reset=_returned,
        reconnect_timeout=300,
    )
    await pool.open(wait=True, timeout=30)
    try:
        yield Database(dsn=dsn, pool=pool, server=info)
    finally:
        await pool.close()
