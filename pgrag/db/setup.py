"""What the set-up commands do to a database: `pgrag migrate`, `pgrag psql`, and the checks
`pgrag serve` makes before it serves. The command line reaches them through pgrag.runtime."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgrag.db import migrations
from pgrag.db.database import connect, prepare, up_to_date
from pgrag.db.embedded import psql_path
from pgrag.db.roles import RoleReport, apply_roles, may_migrate, schema_readable
from pgrag.db.scope import check_scoping_possible
from pgrag.db.server_check import ensure_server_ready


@dataclass
class MigrateOutcome:
    """What `pgrag migrate` did, and the schema's state after it (None: not readable)."""

    applied: list[str] = field(default_factory=list)  # `0007_name` of each applied now
    app_roles: list[str] = field(default_factory=list)
    scoped: bool = False
    notes: list[str] = field(default_factory=list)
    schema_migrations: int | None = None  # applied in all
    pending: int | None = None


async def migrate_schema(
    dsn: str, *, distributed: bool | None, app_role: str | None
) -> MigrateOutcome:
    """Migrate and grant as far as this role may: the owner migrates, a DBA with CREATEROLE
    grants `app_role`, anyone else checks (one line when behind)."""
    conn = await connect(dsn)
    try:
        await ensure_server_ready(conn)
        report: RoleReport | None
        if await may_migrate(conn):
            report = await up_to_date(conn, distributed=distributed, app_role=app_role)
        elif app_role is not None:
            report = await apply_roles(conn, app_role)
        else:
            report = await up_to_date(conn, distributed=distributed)
        status = await migrations.status(conn) if await schema_readable(conn) else None
    finally:
        await conn.close()
    report = report or RoleReport()
    return MigrateOutcome(
        applied=[f"{m.version:04d}_{m.name}" for m in report.applied],
        app_roles=list(report.app_roles),
        scoped=report.scoped,
        notes=list(report.notes),
        schema_migrations=len(status.applied) if status else None,
        pending=len(status.pending) if status else None,
    )


async def ready_to_serve(dsn: str, *, scoped: bool) -> None:
    """The schema up to date and, for collection-limited keys, scoping enforceable."""
    await prepare(dsn)
    if scoped:
        conn = await connect(dsn)
        try:
            await check_scoping_possible(conn)
        finally:
            await conn.close()


def psql_invocation(dsn: str, *, embedded: bool) -> tuple[list[str], dict[str, str]]:
    """psql's command line (the bundled psql for the embedded cluster, else the system's)
    and its environment."""
    binary = str(psql_path()) if embedded else (shutil.which("psql") or str(psql_path()))
    conninfo, env = secret_free(dsn)
    return [binary, conninfo], env


def secret_free(dsn: str) -> tuple[str, dict[str, str]]:
    """The DSN without its password, and an environment carrying the password instead
    (PGPASSWORD): a command line is readable by every local user (`ps`), a process's
    environment only by its owner."""
    params = conninfo_to_dict(dsn)
    password = params.pop("password", None)
    env = dict(os.environ)
    if password is not None:
        env["PGPASSWORD"] = str(password)
    return make_conninfo("", **params), env
