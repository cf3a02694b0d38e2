"""`pgrag search`: a ranked table with each leg's rank and score, or the tool's JSON."""

from __future__ import annotations

import json
import os
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from pgrag.cli.app import cli, run, shown, state
from pgrag.cli.request_options import request_options
from pgrag.runtime import open_runtime
from pgrag.search.counts import Counted
from pgrag.search.counts import counted as count_kind
from pgrag.search.engine import SearchPage, SearchService
from pgrag.search.flat import from_flat
from pgrag.search.models import SearchData, SearchHit
from pgrag.search.modes import mode_spec

# a pipe gets wide rows unless COLUMNS says how wide the reader's terminal is
out = Console(width=None if Console().is_terminal or os.environ.get("COLUMNS") else 160)
err = Console(stderr=True)

WIDE = 120  # from this many columns the snippet gets a column of its own
MAX_LIMIT = 50  # --limit's upper bound (the tool's)
MAX_PAGE_TOKENS = 25_000  # the tool's largest page: the CLI has no model context to save


def _num(value: float | int | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    return str(value) if isinstance(value, int) else f"{value:.{digits}f}"


def _leg(rank: int | None, score: float | None, digits: int) -> str:
    """One leg as `#rank score`, or `-` when the hit was not in that leg's pool."""
    return "-" if rank is None else f"#{rank} {_num(score, digits)}"


def _location(h: SearchHit) -> str:
    loc = h.location
    parts = [
        f"p.{loc.page}" if loc.page else "",
        f"slide {loc.slide}" if loc.slide else "",
        f"{loc.sheet or 'rows'} {loc.rows}" if loc.rows else "",
        loc.section or "",
    ]
    return " ".join(p for p in parts if p)[:40]


# what `total_matches` counts (search/counts.py), in words
COUNTED = {
    Counted.MATCHING: "{n} matching {unit}",
    Counted.AT_LEAST: "at least {n} matching {unit}",
    Counted.NEAREST: "{n} nearest {unit}",
    Counted.RANKED: "{n} ranked {unit}",
}


def counted(data: SearchData, pool_size: int) -> str:
    unit = "documents" if data.scope == "documents" else "chunks"
    return COUNTED[count_kind(data, pool_size)].format(n=data.total_matches, unit=unit)


def print_table(
    data: SearchData,
    hits: list[SearchHit],
    explain: bool,
    *,
    limit: int,
    pool_size: int,
    budget_cut: int | None = None,
) -> None:
    """The hits as a table that fits the terminal (80 columns included); notes on stderr."""
    out.print(_table(data, hits, explain, pool_size))
    for n in _notes(data, hits, explain, limit=limit, pool_size=pool_size, budget_cut=budget_cut):
        err.print(n, highlight=False)


def _table(data: SearchData, hits: list[SearchHit], explain: bool, pool_size: int) -> Table:
    """One row a hit; from WIDE columns on, location and snippet get columns of their own."""
    wide = out.width >= WIDE
    table = Table(
        show_lines=False,
        title=f"{data.mode} search: {len(hits)} of {counted(data, pool_size)}, "
        f"{data.took_ms:.0f} ms",
    )
    table.add_column("#", justify="right")
    table.add_column("document", ratio=1 if wide else 3, overflow="fold")
    if wide:
        table.add_column("location", max_width=28)
    if explain:
        table.add_column("lexical", justify="right", no_wrap=True)
        table.add_column("semantic", justify="right", no_wrap=True)
    reranked = explain and _reranked(hits)
    if reranked:
        table.add_column("rerank", justify="right", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    if wide:
        table.add_column("snippet", overflow="fold", ratio=2)
    for h in hits:
        table.add_row(*_row(h, explain, wide, reranked))
    return table


def _reranked(hits: list[SearchHit]) -> bool:
    return any(h.explain and h.explain.fused_rank is not None for h in hits)


def _row(h: SearchHit, explain: bool, wide: bool, reranked: bool) -> list[str]:
    snippet = " ".join((h.snippets[0].content if h.snippets else h.preview).split())
    if wide:
        row = [str(h.rank), shown(h.path), shown(_location(h))]
    else:  # one cell: path, location and the start of the snippet, one under the other
        where = _location(h)
        cell = shown(h.path) + (f"\n[dim]{shown(where)}[/]" if where else "")
        row = [str(h.rank), cell + f"\n{shown(snippet[:100])}"]
    if explain:
        e = h.explain
        row += (
            [
                _leg(e.lexical_rank, e.lexical_score, 2),
                "no vector" if e.semantic_note else _leg(e.semantic_rank, e.semantic_score, 3),
            ]
            if e
            else ["-", "-"]
        )
    if reranked:  # the rank before reranking and the model's score
        row.append(_leg(h.explain.fused_rank, h.explain.rerank_score, 3) if h.explain else "-")
    row.append(_num(h.score))
    if wide:
        row.append(shown(snippet[:160]))
    return row


def _notes(
    data: SearchData,
    hits: list[SearchHit],
    explain: bool,
    *,
    limit: int,
    pool_size: int,
    budget_cut: int | None,
) -> list[str]:
    """What the table leaves out: a budget or --limit cut, a degraded leg, how to read it."""
    notes = []
    if budget_cut is not None and len(hits) < limit and len(hits) < data.total_matches:
        notes.append(
            f"the --max-tokens budget ({budget_cut}) holds {len(hits)} of the {limit} "
            "asked for: raise it, or leave it out"
        )
    more = data.total_matches - len(hits)
    if more > 0 and len(hits) >= limit:
        notes.append(
            f"{more} more: --limit {min(data.total_matches, MAX_LIMIT)}"
            if limit < MAX_LIMIT
            else f"{more} more than --limit allows ({MAX_LIMIT}): narrow the query or "
            "filter with --collection, --folder or --file-type"
        )
    legs = [d for d in data.degraded if d != "rerank"]
    if legs:
        notes.append(f"degraded: {', '.join(legs)} leg unavailable for this query")
    if "rerank" in data.degraded:
        notes.append("degraded: the reranker failed; the fused order is shown")
    if explain:
        notes += _explain_notes(data, hits, pool_size)
    if data.search_id:
        notes.append(f"reproduce in psql: SELECT * FROM pgrag.explain_search({data.search_id});")
    return notes


def _explain_notes(data: SearchData, hits: list[SearchHit], pool_size: int) -> list[str]:
    """--explain: what the columns mean and the fusion the SQL ranked with."""
    notes = [
        "lexical: BM25 rank and score; semantic: rank and cosine similarity; "
        "- : not in that leg's pool"
    ]
    spec = mode_spec(data.mode)
    if spec.lexical and spec.semantic and data.scope == "chunks":
        notes.append(
            "ranked: chunks with the query's words plus the nearest by meaning "
            f"(up to {pool_size} each); semantic search ranks every chunk, so this is "
            "no count of matches"
        )
    if _reranked(hits):
        notes.append("rerank: the hit's rank before reranking and the rerank model's score")
    if any(h.explain and h.explain.semantic_note for h in hits):
        notes.append("no vector: the chunk's vector is still being computed; found by its words")
    e = hits[0].explain if hits else None
    if e is None or not e.fusion:
        return notes
    if e.fusion == "rrf":
        notes.append(
            f"fusion: RRF k={e.rrf_k}, lexical weight {e.lexical_weight}, "
            f"semantic weight {e.semantic_weight}"
        )
    else:
        notes.append(
            f"fusion: adaptive blend of BM25/max and min-max cosine, lexical share "
            f"min({e.max_lexical_share}, {e.coverage_gain} x query coverage); BM25 x "
            f"(1 - {e.proximity_weight} + {e.proximity_weight} x proximity of the words)"
        )
    return notes


@cli.command()
@click.argument("query")
@request_options(
    max_tokens={
        "default": None,
        "help": "token budget of the page, as MCP clients set it [default: none: --limit results]",
    }
)
@click.option("--json", "as_json", is_flag=True, help="print the MCP tool's data as JSON")
@click.pass_context
def search(ctx: click.Context, /, query: str, as_json: bool, **flat: Any) -> None:
    """Search the knowledge base (hybrid full-text + vector ranking in SQL)."""
    settings = state(ctx).settings
    explain, max_tokens, limit = flat["explain"], flat["max_tokens"], flat["limit"]
    request = from_flat(
        flat,
        query=query,
        explain=explain or as_json,
        max_tokens=max_tokens or MAX_PAGE_TOKENS,
    )

    async def go() -> tuple[SearchPage, list[SearchHit], int]:
        async with open_runtime(settings, max_pool=2) as rt:
            service = SearchService.configured(rt.db.pool, rt.provider, settings)
            first = page = await service.search(request, caller="cli")
            hits = list(page.data.results)
            # a person asked for --limit results: pages a token budget cut short are
            # followed, unless they set the budget themselves (then the note says so)
            while not as_json and max_tokens is None and page.has_more and len(hits) < limit:
                follow = request.model_copy(update={"continuation_token": page.next_token})
                page = await service.search(follow, caller="cli")
                hits += page.data.results
            return first, hits[:limit], service.fusion.pool_size

    page, hits, pool_size = run(go)
    if as_json:
        payload = page.data.model_dump(mode="json")
        payload["continuation"] = {"has_more": page.has_more, "token": page.next_token}
        click.echo(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        print_table(
            page.data,
            hits,
            explain,
            limit=limit,
            pool_size=pool_size,
            budget_cut=max_tokens,
        )
