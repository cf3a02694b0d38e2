"""`pgrag search`: a ranked table with each leg's rank and score, or the tool's JSON."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from pgrag.cli.app import cli, run, state
from pgrag.runtime import open_runtime
from pgrag.search.engine import SearchPage, SearchService
from pgrag.search.models import SearchFilters, SearchRequest

out = Console(width=None if Console().is_terminal else 160)
err = Console(stderr=True)


def _num(value: float | int | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    return str(value) if isinstance(value, int) else f"{value:.{digits}f}"


def _location(h: object) -> str:
    loc = h.location  # type: ignore[attr-defined]
    parts = [
        f"p.{loc.page}" if loc.page else "",
        f"slide {loc.slide}" if loc.slide else "",
        f"{loc.sheet or 'rows'} {loc.rows}" if loc.rows else "",
        loc.section or "",
    ]
    return " ".join(p for p in parts if p)[:40]


def print_table(page: SearchPage, explain: bool) -> None:
    d = page.data
    table = Table(
        show_lines=False, title=f"{d.mode} search, {d.total_matches} matches, {d.took_ms:.0f} ms"
    )
    table.add_column("#", justify="right")
    table.add_column("document", max_width=36)
    table.add_column("location", max_width=28)
    if explain:
        for col in ("lex rank", "lex score", "sem rank", "sem score"):
            table.add_column(col, justify="right")
    table.add_column("score", justify="right")
    table.add_column("snippet", overflow="fold", ratio=2)
    for h in d.results:
        snippet = " ".join((h.snippets[0].content if h.snippets else h.preview).split())[:160]
        row = [str(h.rank), h.path, _location(h)]
        if explain and h.explain:
            e = h.explain
            row += [
                _num(e.lexical_rank),
                _num(e.lexical_score),
                _num(e.semantic_rank),
                _num(e.semantic_score),
            ]
        row += [_num(h.score), snippet]
        table.add_row(*row)
    out.print(table)
    notes = []
    if d.degraded:
        notes.append(f"degraded: {', '.join(d.degraded)} leg unavailable for this query")
    if explain and d.results and d.results[0].explain and d.results[0].explain.fusion:
        e = d.results[0].explain
        if e.fusion == "rrf":
            notes.append(
                f"fusion: RRF k={e.rrf_k}, lexical weight {e.lexical_weight}, "
                f"semantic weight {e.semantic_weight}"
            )
        else:
            notes.append(
                f"fusion: adaptive blend of BM25/max and min-max cosine, lexical share "
                f"min({e.max_lexical_share}, {e.coverage_gain} x query coverage)"
            )
    if d.search_id:
        notes.append(f"reproduce in psql: SELECT * FROM pgrag.explain_search({d.search_id});")
    for n in notes:
        err.print(n, highlight=False)


@cli.command()
@click.argument("query")
@click.option(
    "--mode",
    "-m",
    type=click.Choice(["hybrid", "semantic", "keyword", "exact", "regex"]),
    default="hybrid",
    show_default=True,
)
@click.option(
    "--scope", type=click.Choice(["chunks", "documents"]), default="chunks", show_default=True
)
@click.option("--limit", "-n", type=click.IntRange(1, 50), default=5, show_default=True)
@click.option("--collection", "-c", default=None, help="only this collection")
@click.option("--folder", default=None, help="only this folder (prefix)")
@click.option("--file-type", default=None, help="only this file type, e.g. pdf")
@click.option("--threshold", type=float, default=None, help="minimum cosine similarity")
@click.option("--explain", is_flag=True, help="show each leg's rank and score")
@click.option("--json", "as_json", is_flag=True, help="print the MCP tool's data as JSON")
@click.option("--max-tokens", type=click.IntRange(50, 25000), default=2000, show_default=True)
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    mode: str,
    scope: str,
    limit: int,
    collection: str | None,
    folder: str | None,
    file_type: str | None,
    threshold: float | None,
    explain: bool,
    as_json: bool,
    max_tokens: int,
) -> None:
    """Search the knowledge base (hybrid full-text + vector ranking in SQL)."""
    settings = state(ctx).settings
    request = SearchRequest(
        query=query,
        mode=mode,
        scope=scope,
        limit=limit,
        threshold=threshold,  # type: ignore[arg-type]
        filters=SearchFilters(collection=collection, folder=folder, file_type=file_type),
        explain=explain or as_json,
        max_tokens=max_tokens,
    )

    async def go() -> SearchPage:
        async with open_runtime(settings, max_pool=2) as rt:
            service = SearchService(
                rt.db.pool,
                rt.provider,
                max_snippets=settings.search_max_snippets,
                snippet_summary=settings.return_snippet_summary,
                default_content_mode=settings.default_content_mode,
            )
            return await service.search(request, caller="cli")

    page = run(go)
    if as_json:
        payload = page.data.model_dump(mode="json")
        payload["continuation"] = {"has_more": page.has_more, "token": page.next_token}
        click.echo(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        print_table(page, explain)
