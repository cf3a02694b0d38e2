"""`pgrag migrate`, `pgrag doctor`, `pgrag psql`."""

from __future__ import annotations

import shutil
import subprocess
import sys

import click
from rich.console import Console

from pgrag.cli.app import cli, run, state
from pgrag.db import migrations
from pgrag.db.database import connect, prepare, resolve_dsn
from pgrag.db.embedded import psql_path
from pgrag.doctor import run_checks

err = Console(stderr=True)


@cli.command()
@click.pass_context
def migrate(ctx: click.Context) -> None:
    """Create or upgrade the pgrag schema (safe to run concurrently and repeatedly)."""
    settings = state(ctx).settings

    async def go() -> None:
        dsn = resolve_dsn(settings)
        conn = await connect(dsn)
        try:
            from pgrag.db.server_check import ensure_server_ready

            await ensure_server_ready(conn)
            applied = await migrations.migrate(conn, distributed=settings.distributed)
            st = await migrations.status(conn)
        finally:
            await conn.close()
        for m in applied:
            click.echo(f"applied {m.version:04d}_{m.name}")
        click.echo(f"schema up to date ({len(st.applied)} migrations)")

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
    return subprocess.call([binary, dsn, *psql_args], stdin=sys.stdin)
