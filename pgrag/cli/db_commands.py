"""`pgrag migrate`, `pgrag doctor`, `pgrag psql`."""

from __future__ import annotations

import subprocess
import sys

import click
from rich.console import Console

from pgrag.cli.app import cli, run, state
from pgrag.doctor import run_checks
from pgrag.runtime import migrate_database, psql_command

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

    outcome = run(lambda: migrate_database(settings, app_role=app_role))
    for name in outcome.applied:
        click.echo(f"applied {name}")
    if outcome.pending == 0:
        click.echo(f"schema up to date ({outcome.schema_migrations} migrations)")
    elif outcome.pending is not None:
        err.print(
            f"[yellow]note[/] {outcome.pending} migrations pending: the schema's owner "
            "runs `pgrag migrate`",
            highlight=False,
            soft_wrap=True,
        )
    for role in outcome.app_roles:
        click.echo(f"granted {role} what pgrag needs")
    if outcome.scoped:
        click.echo("role pgrag_scoped ready for collection-limited keys")
    for note in outcome.notes:
        err.print(f"[yellow]note[/] {note}", highlight=False, soft_wrap=True)


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
    argv, env = run(lambda: psql_command(state(ctx).settings))
    return subprocess.call([*argv, *psql_args], stdin=sys.stdin, env=env)
