"""`pgrag eval QUERIES.jsonl`: the user's own queries with expected documents, scored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from pgrag.cli.app import cli, run, shown, state
from pgrag.runtime import open_runtime
from pgrag.search.engine import SearchService
from pgrag.search.modes import SearchMode
from pgrag.services.eval_sets import run_set, save_cases
from pgrag.services.evaluation import (
    EVAL_MODES,
    EvalQuery,
    Outcome,
    QueryFileError,
    parse_queries,
    report,
    run_queries,
    summarise,
)

out = Console(width=None if Console().is_terminal else 120)
err = Console(stderr=True)


class QueryFileUsageError(click.ClickException):
    """A malformed query file is a usage error: one line, exit code 2."""

    exit_code = 2


def _pct(value: float | None, n: int | None = None) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" + (f" ({n})" if n is not None else "")


def print_summary(summary: dict[str, Any]) -> None:
    """One table: per mode the overall line, then categories, then language pairs."""
    table = Table(title="retrieval quality (first result from the expected document)")
    table.add_column("mode")
    table.add_column("group")
    table.add_column("n", justify="right")
    for col in ("hit@1", "hit@3", "MRR@10", "location (n)", "answer (n)"):
        table.add_column(col, justify="right")
    for mode, data in summary.items():
        groups = [("all", data["overall"])]
        groups += [(f"category {c}", m) for c, m in data["categories"].items()]
        groups += [(f"language {k}", m) for k, m in data["languages"].items()]
        for i, (name, m) in enumerate(groups):
            style = "bold" if name == "all" else None
            table.add_row(
                mode if i == 0 else "",
                shown(name),  # user-chosen category names are not rich markup
                str(m["n"]),
                _pct(m["hit@1"]),
                _pct(m["hit@3"]),
                _pct(m["mrr"]),
                _pct(m["location"], m["location_n"]),
                _pct(m["answer"], m["answer_n"]),
                style=style,
                end_section=i == len(groups) - 1,
            )
    out.print(table)


def print_details(outcomes: list[Outcome]) -> None:
    table = Table(title="queries")
    for col in ("mode", "category", "query", "rank", "location", "answer", "first result"):
        table.add_column(col, overflow="fold")
    mark = {True: "ok", False: "MISS", None: "-"}
    for o in outcomes:
        table.add_row(
            o.mode,
            shown(o.category),
            shown(o.query[:60]),  # a regex such as [a-z]+ is not rich markup
            str(o.rank) if o.rank else "-",
            mark[o.location_ok],
            mark[o.answer_ok],
            shown(o.top[0]) if o.top else "-",
        )
    out.print(table)


@cli.command(name="eval")
@click.argument(
    "queries_file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--set",
    "set_name",
    default=None,
    help="a stored evaluation set (the console's): run it, adding QUERIES_FILE's lines to it first",
)
@click.option("--collection", "-c", default=None, help="only this collection")
@click.option(
    "--mode",
    "-m",
    "modes",
    type=click.Choice([m.value for m in EVAL_MODES]),
    multiple=True,
    help="mode(s) for lines without their own mode; repeatable [default: hybrid]",
)
@click.option("--details", is_flag=True, help="also list every query with its rank")
@click.option("--json", "as_json", is_flag=True, help="print the summary and every query as JSON")
@click.pass_context
def eval_(
    ctx: click.Context,
    queries_file: Path | None,
    set_name: str | None,
    collection: str | None,
    modes: tuple[str, ...],
    details: bool,
    as_json: bool,
) -> None:
    """Score your own queries (JSONL: query, document, optional location, answer, mode,
    category) against a collection: hit@1, hit@3, MRR@10, location and answer accuracy.
    With --set, the stored set (each run kept, shown by the console's Evaluation page)."""
    if queries_file is None and not set_name:
        raise QueryFileUsageError("give a QUERIES_FILE, --set NAME, or both")
    queries = _read_queries(queries_file) if queries_file else []
    settings = state(ctx).settings
    chosen = [SearchMode(m) for m in modes] or [SearchMode.HYBRID]

    async def go() -> tuple[list[Outcome], list[str]]:
        async with open_runtime(settings, max_pool=2) as rt:
            service = SearchService.configured(rt.db.pool, rt.provider, settings)
            if not set_name:
                return await run_queries(service, queries, modes=chosen, collection=collection)
            if queries:
                await save_cases(rt.db.pool, set_name, queries, "local")
            return await run_set(service, set_name, chosen, collection)

    outcomes, missing = run(go)
    if as_json:
        click.echo(json.dumps(report(outcomes, missing), ensure_ascii=False, indent=2))
        return
    print_summary(summarise(outcomes))
    if details:
        print_details(outcomes)
    for doc in missing:
        err.print(f"not in the collection (scored as a miss): {doc}", highlight=False)


def _read_queries(queries_file: Path) -> list[EvalQuery]:
    try:
        text = queries_file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise QueryFileUsageError(f"{queries_file}: not UTF-8 ({exc.reason})") from None
    try:
        return parse_queries(text, queries_file.name)
    except QueryFileError as exc:
        raise QueryFileUsageError(str(exc)) from None
