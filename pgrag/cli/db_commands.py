"""`pgrag migrate`, `pgrag doctor`, `pgrag psql`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import click
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from rich.console import Console

from pgrag.cli.app import cli, run, state
from pgrag.db import migrations
from pgrag.db.database import connect, prepare, resolve_dsn, up_to_date
from pgrag.db.embedded import psql_path
from pgrag.db.roles import apply_roles, may_migrate, schema_readable
from pgrag.db.server_check import ensure_server_ready
from pgrag.doctor import run_checks

err = Console(stderr=True)


@cli.command()
@click.option(
    "--app-role",
    metavar="ROLE",
    default=None,
    help="grant ROLE what ingest, serve, search and reindex need (run as the schema's owner); "
    "also creates and grants pgrag_scoped where this role may create roles",
)
@click.pass_context
def migrate(ctx: click.Context, app_role: str | None) -> None:
    """Create or upgrade the pgrag schema and its grants (safe to run concurrently and
    repeatedly; a re-run repairs missing roles and grants)."""
    settings = state(ctx).settings

    async def go() -> None:
        dsn = resolve_dsn(settings)
        conn = await connect(dsn)
        try:
            await ensure_server_ready(conn)
            if await may_migrate(conn):
                report = await up_to_date(conn, distributed=settings.distributed, app_role=app_role)
            elif app_role is not None:  # a DBA with CREATEROLE: the roles and memberships
                report = await apply_roles(conn, app_role)
            else:  # nothing this role may do but check (one line when behind)
                report = await up_to_date(conn, distributed=settings.distributed)
            st = await migrations.status(conn) if await schema_readable(conn) else None
        finally:
            await conn.close()
        for m in report.applied if report else []:
            click.echo(f"applied {m.version:04d}_{m.name}")
        if st is not None and not st.pending:
            click.echo(f"schema up to date ({len(st.applied)} migrations)")
        elif st is not None:
            err.print(
                f"[yellow]note[/] {len(st.pending)} migrations pending: the schema's owner "
                "runs `pgrag migrate`",
                highlight=False,
                soft_wrap=True,
            )
        for role in report.app_roles if report else []:
            click.echo(f"granted {role} what pgrag needs")
        if report is not None and report.scoped:
            click.echo("role pgrag_scoped ready for collection-limited keys")
        for note in report.notes if report else []:
            err.print(f"[yellow]note[/] {note}", highlight=False, soft_wrap=True)

    run(go)


@cli.command()
@click.pass_context
def doctor(ctx: click.Context) -> int:
    """Check configuration, database, pgvector, migrations and the embedding model."""
    st = state(ctx)
    results = run(lambda: run_checks(st.overrides))
    for r in results:
        mark = "[red]FAIL[/]" if not r.ok else "[yellow]note[/]" if r.note else "[green]ok[/]  "
        err.print(f"{mark} {r.name}: {r.detail}", highlight=False, soft_wrap=True)
    return 0 if all(r.ok for r in results) else 1


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("psql_args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def psql(ctx: click.Context, psql_args: tuple[str, ...]) -> int:
    """Open psql on the configured or embedded database (extra arguments go to psql)."""
    settings = state(ctx).settings
    dsn = resolve_dsn(settings)
    run(lambda: prepare(dsn, distributed=settings.distributed))
    binary = (
        str(psql_path())
        if settings.uses_embedded_postgres
        else (shutil.which("psql") or str(psql_path()))
    )
    conninfo, env = secret_free(dsn)
    return subprocess.call([binary, conninfo, *psql_args], stdin=sys.stdin, env=env)


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
