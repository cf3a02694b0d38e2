"""`pgrag reindex`: re-embed a collection with another model while searches keep working."""

from __future__ import annotations

from typing import Any

import click
import psycopg
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from pgrag.cli.app import cli, run, state
from pgrag.errors import ConfigError, ErrorCode, PgragError
from pgrag.ingest.reindex import ReindexEvent, ReindexResult, reindex
from pgrag.runtime import open_runtime
from pgrag.settings import Settings, load_settings

out = Console()
err = Console(stderr=True)

RESUME_HINT = "finished batches are kept: run the same command again to resume"
RESUMABLE = {
    ErrorCode.UPSTREAM_ERROR,
    ErrorCode.DB_ERROR,
    ErrorCode.DB_SETUP,  # once the DBA has run the fix
    ErrorCode.TIMEOUT,
    ErrorCode.INTERNAL,
}


def _target_settings(overrides: dict[str, Any], model: str) -> Settings:
    """The settings with the new model, validated like PGRAG_EMBEDDING_MODEL."""
    try:
        return load_settings(**{**overrides, "embedding_model": model})
    except ConfigError as exc:
        message = str(exc).removeprefix("PGRAG_EMBEDDING_MODEL: ")
        raise click.BadParameter(message, param_hint="'--model'") from None


def print_result(result: ReindexResult) -> None:
    table = Table(title=f"collection {result.collection}", show_header=False, show_edge=False)
    table.add_row("embedding set", str(result.set_id))
    table.add_row("model", f"{result.model} ({result.dimensions} dimensions)")
    if result.previous_model:
        table.add_row("replaces", f"{result.previous_model} (set {result.previous_set_id})")
    table.add_row("chunks", str(result.chunks))
    table.add_row("embedded now", str(result.embedded))
    table.add_row("from cache", str(result.from_cache))
    table.add_row("kept from an earlier run", str(result.resumed))
    table.add_row("switched", "yes" if result.switched else "no (already active)")
    dropped = ", ".join(map(str, result.dropped_set_ids)) or "none (old set kept as retired)"
    table.add_row("dropped sets", dropped)
    out.print(table)


@cli.command(name="reindex")
@click.option("--collection", "-c", default=None, help="collection to re-embed [PGRAG_COLLECTION]")
@click.option(
    "--model", "-m", required=True, help="model to switch to, e.g. openai/text-embedding-3-large"
)
@click.option(
    "--drop-old", is_flag=True, help="after the switch, delete retired sets and their indexes"
)
@click.option("--quiet", "-q", is_flag=True, help="no progress bar")
@click.pass_context
def reindex_command(
    ctx: click.Context, collection: str | None, model: str, drop_old: bool, quiet: bool
) -> None:
    """Embed every chunk with another model into a new embedding set (searches keep using
    the current one), then switch atomically. Interrupted? Run it again to resume."""
    st = state(ctx)
    if collection:
        st.overrides["collection"] = collection
    settings = st.settings
    target = _target_settings(st.overrides, model)

    async def go() -> ReindexResult:
        async with open_runtime(target, max_pool=2) as rt:
            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("chunks"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=err,
                disable=quiet,
                transient=True,
            ) as bar:
                task = bar.add_task(f"embedding with {model}", total=None)

                def report(ev: ReindexEvent) -> None:
                    bar.update(task, completed=ev.done, total=ev.total)
                    if ev.kind == "switch" and drop_old:
                        bar.update(task, description="switched; dropping the old set")

                return await reindex(
                    rt.db.pool, settings.collection, rt.provider, drop_old=drop_old, reporter=report
                )

    try:
        result = run(go)
    except PgragError as exc:
        if exc.code in RESUMABLE:
            err.print(RESUME_HINT)
        raise
    except (KeyboardInterrupt, psycopg.Error):
        err.print(RESUME_HINT)
        raise
    print_result(result)
    if settings.embedding_model != model:
        err.print(
            f"[yellow]now set PGRAG_EMBEDDING_MODEL={model}[/] (and restart running servers): "
            f"with {settings.embedding_model} ingestion into this collection is refused and "
            "searches find no semantic matches (`pgrag doctor` reports the mismatch).",
            highlight=False,
            soft_wrap=True,
        )
