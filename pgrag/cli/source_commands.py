"""`pgrag source add|list|remove|sync`: index the rows of the user's own tables."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pgrag.cli.app import cli, run, state
from pgrag.ingest.table_sync import SourceProgress, describe
from pgrag.runtime import open_runtime
from pgrag.services import table_sources as service

err = Console(stderr=True)


def _columns(value: str | None) -> list[str]:
    return [c.strip() for c in (value or "").split(",") if c.strip()]


@cli.group()
def source() -> None:
    """Index rows of your own PostgreSQL tables, kept in sync by triggers."""


@source.command("add")
@click.argument("table")
@click.option("--text", "text", required=True, help="text column(s), comma-separated")
@click.option("--id", "id_", default=None, help="key column(s) (default: the primary key)")
@click.option("--title", default=None, help="title column")
@click.option("--metadata", default=None, help="metadata column(s), usable as search filters")
@click.option("--collection", "-c", default=None, help="collection [PGRAG_COLLECTION]")
@click.option("--name", default=None, help="source name (default: the table's)")
@click.pass_context
def add(
    ctx: click.Context,
    table: str,
    text: str,
    id_: str | None,
    title: str | None,
    metadata: str | None,
    collection: str | None,
    name: str | None,
) -> None:
    """Register TABLE (again: change it in place); existing rows are backfilled by the
    next `pgrag source sync` or a running `pgrag serve`."""
    settings = state(ctx).settings
    new = service.NewSource(
        table=table,
        text_columns=_columns(text),
        id_columns=_columns(id_) or None,
        title_column=title,
        metadata_columns=_columns(metadata),
        collection=collection or settings.collection,
        name=name,
    )

    async def go() -> service.SourceInfo:
        async with open_runtime(settings, max_pool=2) as rt:
            return await service.add_source(rt.db.pool, new)

    info = run(go)
    err.print(
        f"source {escape(info.name)}: {escape(info.table)} -> collection "
        f"{escape(info.collection)}, {info.pending} rows to index"
    )


@source.command("list")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def list_(ctx: click.Context, as_json: bool) -> None:
    """Sources with rows indexed, pending (exact), failed, and the lag."""
    settings = state(ctx).settings

    async def go() -> list[service.SourceInfo]:
        async with open_runtime(settings, max_pool=2) as rt:
            return await service.list_sources(rt.db.pool)

    infos = run(go)
    if as_json:
        click.echo(json.dumps([i.model_dump(mode="json") for i in infos], indent=2))
        return
    table = Table(show_edge=False)
    for col in ("source", "table", "collection", "state", "indexed", "pending", "failed", "lag"):
        table.add_column(
            col, justify="right" if col in ("indexed", "pending", "failed") else "left"
        )
    for i in infos:
        table.add_row(
            escape(i.name),
            escape(i.table),
            escape(i.collection),
            i.state,
            str(i.rows_indexed),
            str(i.pending),
            str(i.rows_failed),
            f"{i.lag_seconds:.1f}s",
        )
    Console().print(table)
    for i in infos:
        if i.failure:
            err.print(f"[red]{escape(i.name)} failed:[/] {escape(i.failure)}")
        for row in i.failed_rows:
            key = json.dumps(row.key, ensure_ascii=False)
            err.print(
                f"[red]{escape(i.name)} row {escape(key)}:[/] {row.code}: {escape(row.reason)}"
            )


@source.command("remove")
@click.argument("name")
@click.pass_context
def remove(ctx: click.Context, name: str) -> None:
    """Stop indexing NAME: its triggers, queue and documents go."""
    settings = state(ctx).settings

    async def go() -> None:
        async with open_runtime(settings, max_pool=2) as rt:
            await service.remove_source(rt.db.pool, rt.provider, settings, name)

    run(go)
    err.print(f"source {escape(name)} removed")


@source.command("sync")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def sync(ctx: click.Context, name: str | None, as_json: bool) -> int:
    """Drain the queue once (for cron or a set-up without `pgrag serve`)."""
    settings = state(ctx).settings

    def report(p: SourceProgress) -> None:
        if p.backfill_total and not as_json:
            eta = p.eta_seconds()
            left = f", about {eta:.0f}s left" if eta is not None else ""
            err.print(f"{escape(p.name)}: backfill {p.backfill_done}/{p.backfill_total}{left}")

    async def go() -> list[SourceProgress]:
        async with open_runtime(settings, max_pool=4) as rt:
            return await service.sync(rt.db.pool, rt.provider, settings, name, report)

    done = run(go)
    if as_json:
        click.echo(json.dumps([describe(p) for p in done], indent=2))
    for p in done:
        line = (
            f"{escape(p.name)}: {p.written} written, {p.unchanged} unchanged, {p.removed} removed"
        )
        err.print(line + (f" - [red]failed:[/] {escape(p.failure)}" if p.failure else ""))
    return 1 if any(p.failure for p in done) else 0
