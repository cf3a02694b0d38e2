"""Evaluation: a stored set, or a JSONL query set (the `pgrag eval` format, pasted or
uploaded), run through `pgrag eval`'s service; hit@1, hit@3, MRR, location and answer per
mode, category and language pair, the misses with a link to the playground, and a stored
set's earlier runs for a before/after. For keys that read every collection: the service
resolves expected documents across all of them."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, get_args
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, File, Form, Query, UploadFile
from fastapi.responses import Response

from pgrag.errors import Forbidden, InvalidArgument
from pgrag.search.models import Fusion
from pgrag.search.modes import SearchMode, mode_spec
from pgrag.services.eval_compare import knob_settings, run_compared
from pgrag.services.eval_sets import (
    earlier_runs,
    history,
    list_sets,
    run_set,
    run_set_compared,
    save_cases,
)
from pgrag.services.evaluation import (
    CASE_OPTIONS,
    EVAL_MODES,
    METRICS,
    EvalQuery,
    QueryFileError,
    parse_queries,
    report,
    run_queries,
)
from pgrag.web.core import View, html_errors, view_of

router = APIRouter(include_in_schema=False)
Page = Annotated[View, Depends(view_of)]
MAX_QUERIES = 200  # one request; larger sets belong to `pgrag eval`
MAX_FILE_BYTES = 2_000_000
EVAL_TIMEOUT_S = 300.0
FORM_MODES = tuple(m for m in EVAL_MODES if not mode_spec(m).pattern)  # regex lines name theirs
Name = Annotated[str, Form(max_length=200)]


def for_every_collection(view: View) -> None:
    if view.scope is not None:
        raise Forbidden("evaluation is for keys that read every collection")


def checked_post(view: View, csrf: str) -> None:
    """A state-changing request: the session's CSRF token, a caller who reads everything."""
    view.posted(csrf)
    for_every_collection(view)


async def _page(view: View, set_name: str, **values: Any) -> Response:
    pool = view.context.pool
    runs = await earlier_runs(pool, set_name) if set_name else []
    values.setdefault("form", {"set": set_name})
    return view.page(
        "eval.html",
        nav="eval",
        modes=FORM_MODES,
        metrics=METRICS,
        sets=await list_sets(pool),
        runs=history(runs),
        knobs=CASE_OPTIONS,
        fusions=get_args(Fusion),
        reranks=view.context.search.reranker is not None,
        **{"chosen": ["hybrid"], **values},
    )


@router.get("/console/eval")
@html_errors
async def eval_form(
    view: Page, set_name: Annotated[str, Query(alias="set", max_length=200)] = ""
) -> Response:
    for_every_collection(view)
    return await _page(view, set_name)


async def _queries(text: str, file: UploadFile | None) -> list[EvalQuery]:
    source = "queries"
    if file is not None and file.filename:
        raw = await file.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise InvalidArgument(f"the query file is over {MAX_FILE_BYTES} bytes")
        text, source = raw.decode("utf-8-sig", errors="replace"), file.filename
    try:
        parsed = parse_queries(text, source=source)
    except QueryFileError as exc:
        raise InvalidArgument(str(exc)) from None
    if len(parsed) > MAX_QUERIES:
        raise InvalidArgument(f"{len(parsed)} queries: the console runs up to {MAX_QUERIES}")
    return parsed


@router.post("/console/eval")
@html_errors
async def eval_run(
    view: Page,
    csrf: Annotated[str, Form(max_length=200)] = "",
    queries: Annotated[str, Form(max_length=MAX_FILE_BYTES)] = "",
    file: Annotated[UploadFile | None, File()] = None,
    modes: Annotated[list[str] | None, Form()] = None,
    collection: Name = "",
    set_name: Annotated[str, Form(alias="set", max_length=200)] = "",
) -> Response:
    """Pasted or uploaded queries (kept in the set named, if one is), else the named set."""
    checked_post(view, csrf)
    chosen = [SearchMode(m) for m in modes or () if m in FORM_MODES] or [SearchMode.HYBRID]
    posted = await view.request.form()
    knob_form = {k: str(v)[:100] for k, v in posted.items() if k.startswith(("before_", "after_"))}
    options = knob_settings(knob_form)
    search, scope, name = view.context.search, collection or None, set_name.strip()
    pasted = bool(queries.strip() or (file is not None and file.filename))
    if not pasted and not name:
        raise InvalidArgument("paste queries, upload a JSONL file or name a stored set")
    parsed = await _queries(queries, file) if pasted else []
    if pasted and name:
        await save_cases(view.context.pool, name, parsed, view.signed_in.name)
    compared = None
    if options is not None:
        run_c = (
            run_set_compared(search, name, options, chosen, scope)
            if name
            else run_compared(search, parsed, options, modes=chosen, collection=scope)
        )
        compared = await asyncio.wait_for(run_c, EVAL_TIMEOUT_S)
        result = compared.after
    else:
        run = (
            run_set(search, name, chosen, scope)
            if name
            else run_queries(search, parsed, modes=chosen, collection=scope)
        )
        result = report(*await asyncio.wait_for(run, EVAL_TIMEOUT_S))
    form = {"queries": queries, "collection": collection, "set": name, **knob_form}
    misses = [_miss(q, collection) for q in result["queries"] if q["rank"] != 1]
    return await _page(
        view, name, chosen=chosen, form=form, result=result, misses=misses, compared=compared
    )


def _miss(outcome: dict[str, Any], collection: str) -> dict[str, Any]:
    """A query whose expected document did not come first, with its playground URL."""
    args = {"q": outcome["query"], "mode": outcome["mode"]}
    if collection:
        args["collection"] = collection
    return {**outcome, "url": "/console/search?" + urlencode(args)}
