"""`pgrag ingest` (with a progress bar and a summary table) and `pgrag status`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from pgrag.cli.app import cli, run, shown, state
from pgrag.ingest.pipeline import IngestEvent, IngestSummary, Outcome
from pgrag.runtime import open_runtime
from pgrag.services.ingestion import make_ingestor
from pgrag.services.status import status_report

out = Console()
err = Console(stderr=True)


def print_summary(summary: IngestSummary) -> None:
    table = Table(title=f"collection {summary.collection}", show_edge=False)
    for outcome in Outcome:
        table.add_column(str(outcome), justify="right")
    table.add_row(*(str(summary.count(o)) for o in Outcome))
    err.print(table)
    refused = [r for r in summary.results if r.outcome == Outcome.SKIPPED and r.error_code]
    if summary.failures or refused:
        fail = Table(title="not ingested", show_edge=False)
        fail.add_column("file")
        fail.add_column("status")
        fail.add_column("reason")
        for r in [*summary.failures, *refused]:
            fail.add_row(shown(r.path), str(r.outcome), shown(f"{r.error_code}: {r.error}"))
        err.print(fail)
    if summary.resumed:
        done = sum(r.chunks - r.vectors_pending for r in summary.resumed)
        err.print(
            f"vectors left by earlier runs: {done} chunks of {len(summary.resumed)} documents"
        )
    if summary.waiting:
        wait = Table(title="searchable by keyword, waiting for vectors", show_edge=False)
        wait.add_column("file")
        wait.add_column("vectors missing", justify="right")
        wait.add_column("reason")
        for r in summary.waiting:
            reason = shown(f"{r.error_code}: {r.error}") if r.error_code else ""
            wait.add_row(shown(r.path), f"{r.vectors_pending} of {r.chunks}", reason)
        err.print(wait)
        err.print("the next `pgrag ingest` (or `pgrag serve`) computes them")


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--collection", "-c", default=None, help="collection to ingest into [PGRAG_COLLECTION]"
)
@click.option("--watch", is_flag=True, help="keep running and re-ingest on changes")
@click.option("--quiet", "-q", is_flag=True, help="no progress bar")
@click.option(
    "--refresh",
    is_flag=True,
    help="re-chunk unchanged files too (after a change of chunking or document context)",
)
@click.pass_context
def ingest(
    ctx: click.Context,
    paths: tuple[Path, ...],
    collection: str | None,
    watch: bool,
    quiet: bool,
    refresh: bool,
) -> int:
    """Ingest files and folders: new and changed files are indexed, removed ones dropped."""
    st = state(ctx)
    if collection:
        st.overrides["collection"] = collection
    settings = st.settings

    async def go() -> IngestSummary:
        async with open_runtime(settings) as rt:
            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[current]}"),
                TimeElapsedColumn(),
                console=err,
                disable=quiet,
                transient=True,
            ) as bar:
                task = bar.add_task("ingesting", total=None, current="")
                vectors = bar.add_task("vectors", total=None, current="", visible=False)

                def report(ev: IngestEvent) -> None:
                    if ev.kind == "scan":
                        bar.update(task, total=(bar.tasks[0].total or 0) + ev.total)
                    elif ev.kind == "file_start":
                        bar.update(task, current=shown(ev.path[-50:]))
                    elif ev.kind == "ocr":
                        bar.update(
                            task, current=f"{shown(ev.path[-40:])} OCR {ev.done}/{ev.total} pages"
                        )
                    elif ev.kind == "embed":  # searchable by keyword already
                        where = f"{shown(ev.path[-40:])} {ev.done}/{ev.total} chunks"
                        bar.update(vectors, current=where, visible=True)
                    elif ev.kind == "vectors":
                        bar.update(vectors, total=ev.total, completed=ev.done, visible=True)
                    elif (
                        ev.kind == "file_done"
                        and ev.result
                        and ev.result.outcome != Outcome.REMOVED
                    ):
                        bar.advance(task)

                ingestor = make_ingestor(
                    settings, rt.db.pool, rt.provider, reporter=report, refresh=refresh
                )
                summary = await ingestor.run(list(paths))
            print_summary(summary)
            if watch:
                from pgrag.ingest.watch import watch_and_ingest

                err.print("watching for changes (Ctrl-C to stop)")
                await watch_and_ingest(ingestor, list(paths), on_summary=print_summary)
            return summary

    summary = run(go)
    return (
        1
        if summary.count(Outcome.FAILED)
        and not (
            summary.count(Outcome.ADDED)
            + summary.count(Outcome.UPDATED)
            + summary.count(Outcome.UNCHANGED)
        )
        else 0
    )


def _ocr_line(ocr: dict[str, Any]) -> str:
    """The status table's OCR row: pages read, confidence, failures, missing engine."""
    line = f"{ocr['pages']} pages in {ocr['documents']} documents"
    if ocr["mean_confidence"] is not None:
        line += f", mean confidence {ocr['mean_confidence']:.2f}"
    if ocr["failed_pages"]:
        line += f", {ocr['failed_pages']} pages failed"
    if ocr["unavailable"]:
        line += f", {ocr['unavailable']} documents need an OCR engine (OCR_UNAVAILABLE)"
    return line


@cli.command()
@click.argument("document", required=False)
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@click.pass_context
def status(ctx: click.Context, document: str | None, as_json: bool) -> None:
    """Documents by status, or one document's status, progress and error."""
    settings = state(ctx).settings

    async def go() -> dict[str, Any]:
        async with open_runtime(settings, max_pool=2) as rt, rt.db.pool.connection() as conn:
            return await status_report(conn, document)

    report = run(go)
    if as_json:
        import json

        click.echo(json.dumps(report, indent=2, default=str, ensure_ascii=False))
        return
    table = Table(show_edge=False)
    if document:
        for key, value in report.items():
            table.add_row(key, shown(str(value)))
    else:
        table.add_column("status")
        table.add_column("documents", justify="right")
        for key, value in report["counts"].items():
            table.add_row(key, shown(str(value)))
        for doc in report["failed"]:
            table.add_row(
                f"[red]failed[/] {shown(doc['path'])}",
                shown(f"{doc['error_code']}: {doc['error_detail']}"),
            )
        waiting = report["vectors_pending"]
        if waiting["documents"]:
            table.add_row(
                "waiting for vectors",
                f"{waiting['documents']} ({waiting['chunks']} chunks searchable by keyword only)",
            )
        for doc in report["waiting_for_vectors"]:
            reason = f" {doc['error_code']}: {doc['error_detail']}" if doc["error_code"] else ""
            table.add_row(
                f"[yellow]vectors[/] {shown(doc['path'])}",
                shown(f"{doc['embedded']}/{doc['chunks']} embedded{reason}"),
            )
        if report["ocr"]:
            table.add_row("read by OCR", _ocr_line(report["ocr"]))
        for src in report["sources"]:
            table.add_row(f"source {shown(src['name'])}", shown(_source_line(src)))
    out.print(table)


def _source_line(src: dict[str, Any]) -> str:
    """A table source's status row: state, rows indexed and pending, lag, failure."""
    line = (
        f"{src['state']}: {src['rows_indexed']} rows indexed, {src['pending']} pending, "
        f"lag {src['lag_seconds']:.1f}s"
    )
    if src["rows_failed"]:
        line += f", {src['rows_failed']} rows failed"
        first = (src.get("failed_rows") or [None])[0]
        if first:
            line += f" (first: {first['code']}: {first['reason']})"
    return line + (f" - failed: {src['failure']}" if src["failure"] else "")
