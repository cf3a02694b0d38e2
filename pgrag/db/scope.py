"""Connections that can only see the caller's collections (row-level security, migrations
0011 and 0019): the request's transaction enters the scope with `pgrag.enter_scope`, which
switches to the role `pgrag_scoped` and sets the scope's collection ids that the policies
compare with (on a Citus cluster they reach the workers, where the shards' policies run:
cluster_scopes below, docs/scale-out.md). Every request's statements read one snapshot
(REPEATABLE READ), scoped or not."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import cast

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from pgrag.db.one import scalar
from pgrag.errors import ConfigError, DatabaseError, ErrorCode, PgragError

log = logging.getLogger(__name__)

SCOPED_ROLE = "pgrag_scoped"
# SET LOCAL ROLE pgrag_scoped and the scope (as names and as collection ids, passed on to
# a Citus cluster's workers) in one statement: sql/functions/10_filters.sql
SET_SCOPE_SQL = "SELECT pgrag.enter_scope(%s)"
CAN_SCOPE_SQL = (
    "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pgrag_scoped')"
    " AND pg_has_role(current_user, 'pgrag_scoped', 'MEMBER')"
)
# on a Citus cluster the coordinator reaches the workers as the current role: pgrag_scoped
# must be able to log in there (pgrag.db.distributed gives it LOGIN)
CLUSTER_CANNOT_SCOPE_SQL = (
    "SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL"
    " AND to_regclass('pgrag.documents') IS NOT NULL"
    " AND NOT (SELECT rolcanlogin FROM pg_roles WHERE rolname = 'pgrag_scoped')"
)
DISTRIBUTED_DOCUMENTS_SQL = (
    "SELECT EXISTS (SELECT 1 FROM pg_dist_partition"
    " WHERE logicalrelid = 'pgrag.documents'::regclass)"
)


POOL_WAIT_S = 5.0  # bounded queueing for a connection; request timeouts are longer


async def _why_no_connection(pool: AsyncConnectionPool) -> PgragError:
    """The pool had nothing for us: is the database down, or are we just busy?"""
    try:
        probe = await psycopg.AsyncConnection.connect(
            cast(str, pool.conninfo),
            connect_timeout=2,  # pgrag builds pools from a DSN
        )
    except psycopg.OperationalError:
        return DatabaseError(
            "the database is unavailable: retry in a few seconds", detail={"retry_after_s": 5}
        )
    await probe.close()
    return PgragError(
        "the server is busy (every database connection is in use): retry shortly",
        code=ErrorCode.TIMEOUT,
        detail={"retry_after_s": 1},
    )


@contextlib.asynccontextmanager
async def pooled_connection(pool: AsyncConnectionPool) -> AsyncIterator[psycopg.AsyncConnection]:
    """A pooled connection after a bounded wait; DB_ERROR when the database is down,
    TIMEOUT when the pool is exhausted - never an unbounded hang."""
    try:
        conn = await pool.getconn(timeout=POOL_WAIT_S)
    except PoolTimeout as exc:
        raise await _why_no_connection(pool) from exc
    try:
        yield conn
    finally:
        await pool.putconn(conn)


@contextlib.asynccontextmanager
async def snapshot(conn: psycopg.AsyncConnection) -> AsyncIterator[None]:
    """One REPEATABLE READ transaction: a request of several statements (rank then fetch the
    hits, resolve then read, text then chunks) must not see a version committed in between.
    Begun by a single `BEGIN ISOLATION LEVEL REPEATABLE READ` (no SET TRANSACTION trip)."""
    await conn.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)
    try:
        async with conn.transaction():
            yield
    finally:
        if not conn.closed:  # pooled connections begin at the default level otherwise
            await conn.set_isolation_level(None)


@contextlib.asynccontextmanager
async def scoped_connection(
    pool: AsyncConnectionPool, scope: list[str] | None
) -> AsyncIterator[psycopg.AsyncConnection]:
    """A pooled connection whose statements all run in one snapshot: the old version of a
    document or the new one, never parts of both, and a document deleted meanwhile not at
    all. With a scope, under RLS too (role pgrag_scoped for this transaction only)."""
    async with pooled_connection(pool) as conn, snapshot(conn):
        if scope is not None:
            await conn.execute(SET_SCOPE_SQL, ("|".join(scope),))
        yield conn


SCOPING_IMPOSSIBLE = (
    "PGRAG_API_KEYS limits keys to collections, which needs the role pgrag_scoped and "
    "{role}'s membership in it: a role with CREATEROLE runs `pgrag migrate --app-role "
    "{role}` (docs/existing-postgresql.md), then start again"
)
SCOPED_UNGRANTED = (
    "PGRAG_API_KEYS limits keys to collections, and the role pgrag_scoped lacks its "
    "privileges on pgrag's tables: the schema's owner runs `pgrag migrate --app-role {role}`"
)
SCOPED_GRANTED_SQL = "SELECT pgrag.scoped_role_granted()"
SCOPING_IMPOSSIBLE_ON_CLUSTER = (
    "PGRAG_API_KEYS limits keys to collections: on a Citus cluster the role pgrag_scoped "
    "must be able to log in to the workers: run `PGRAG_DISTRIBUTED=true pgrag migrate` as a "
    "user with CREATEROLE (or ALTER ROLE pgrag_scoped LOGIN; see docs/scale-out.md), then "
    "start again"
)


async def check_scoping_possible(conn: psycopg.AsyncConnection) -> None:
    """Collection-limited keys need the role pgrag_scoped (and, on a Citus cluster, its
    LOGIN): refuse to start without it (a configuration error, exit 2) rather than serve
    keys whose limits could not be kept or whose every request would fail."""
    ok = await scalar(conn, CAN_SCOPE_SQL)
    role = await scalar(conn, "SELECT current_user")
    if not ok:
        raise ConfigError(SCOPING_IMPOSSIBLE.format(role=role))
    if not await scalar(conn, SCOPED_GRANTED_SQL):
        raise ConfigError(SCOPED_UNGRANTED.format(role=role))
    if await scalar(conn, CLUSTER_CANNOT_SCOPE_SQL) and await scalar(
        conn, DISTRIBUTED_DOCUMENTS_SQL
    ):
        raise ConfigError(SCOPING_IMPOSSIBLE_ON_CLUSTER)


async def ensure_scoping_possible(pool: AsyncConnectionPool) -> None:
    async with pool.connection() as conn:
        await check_scoping_possible(conn)


SCOPED_LOGIN_SQL = "SELECT (SELECT rolcanlogin FROM pg_roles WHERE rolname = 'pgrag_scoped')"


async def cluster_scopes(conn: psycopg.AsyncConnection) -> bool:
    """Collection scopes on a Citus cluster (run by pgrag.db.distributed at every migrate).
    The shards' policies run on the workers, as the role of the coordinator's connection
    (the policies themselves read only pgrag.scope_ids, migration 0019, which the
    coordinator passes on): pgrag_scoped gets LOGIN (Citus alters it on every node;
    password authentication: docs/scale-out.md). False, with a warning, when this user may
    not alter the role: scoped keys are then refused at start-up (check_scoping_possible)."""
    can_login = await scalar(conn, SCOPED_LOGIN_SQL)
    if can_login is None or can_login:
        return bool(can_login)
    try:
        async with conn.transaction():
            await conn.execute("ALTER ROLE pgrag_scoped LOGIN")
    except psycopg.errors.InsufficientPrivilege:
        log.warning(
            "cannot ALTER ROLE pgrag_scoped LOGIN (needs CREATEROLE): collection-scoped API "
            "keys are refused on this cluster until a DBA runs it (docs/scale-out.md)"
        )
        return False
    return True
