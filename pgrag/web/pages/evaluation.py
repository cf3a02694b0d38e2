"""Evaluation: a JSONL query set (the `pgrag eval` format, pasted or uploaded) run through
`pgrag eval`'s service; hit@1, hit@3, MRR, location and answer per mode, category and
language pair, and the misses with a link to the playground. For keys that read every
collection: the evaluation service resolves expected documents across all of them."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, File, Form, UploadFile
from fastapi.responses import Response

from pgrag.errors import Forbidden, InvalidArgument
from pgrag.services.evaluation import (
    EVAL_MODES,
    METRICS,
    QueryFileError,
    parse_queries,
    report,
    run_queries,
)
from pgrag.web.core import View, html_errors, view_of
from pgrag.web.session import csrf_ok

router = APIRouter(include_in_schema=False)
Page = Annotated[View, Depends(view_of)]
MAX_QUERIES = 200  # one request; larger sets belong to `pgrag eval`
MAX_FILE_BYTES = 2_000_000
EVAL_TIMEOUT_S = 300.0
FORM_MODES = tuple(m for m in EVAL_MODES if m != "regex")  # regex lines name their mode


def _for_every_collection(view: View) -> None:
    if view.scope is not None:
        raise Forbidden("evaluation is for keys that read every collection")


@router.get("/console/eval")
@html_errors
async def eval_form(view: Page) -> Response:
    _for_every_collection(view)
    return view.page("eval.html", nav="eval", modes=FORM_MODES, chosen=["hybrid"], form={})


@router.post("/console/eval")
@html_errors
async def eval_run(
    view: Page,
    csrf: Annotated[str, Form(max_length=200)] = "",
    queries: Annotated[str, Form(max_length=MAX_FILE_BYTES)] = "",
    file: Annotated[UploadFile | None, File()] = None,
    modes: Annotated[list[str] | None, Form()] = None,
    collection: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    if not csrf_ok(None if view.fresh else view.session, csrf):
        raise Forbidden("missing or wrong CSRF token: reload the page and try again")
    _for_every_collection(view)
    chosen = [m for m in (modes or ["hybrid"]) if m in FORM_MODES] or ["hybrid"]
    text = queries
    if file is not None and file.filename:
        raw = await file.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise InvalidArgument(f"the query file is over {MAX_FILE_BYTES} bytes")
        text = raw.decode("utf-8", errors="replace")
    try:
        parsed = parse_queries(text, source=file.filename if file and file.filename else "queries")
    except QueryFileError as exc:
        raise InvalidArgument(str(exc)) from None
    if len(parsed) > MAX_QUERIES:
        raise InvalidArgument(f"{len(parsed)} queries: the console runs up to {MAX_QUERIES}")
    outcomes, missing = await asyncio.wait_for(
        run_queries(view.context.search, parsed, modes=chosen, collection=collection or None),
        EVAL_TIMEOUT_S,
    )
    result = report(outcomes, missing)
    return view.page(
        "eval.html",
        nav="eval",
        modes=FORM_MODES,
        chosen=chosen,
        form={"queries": queries, "collection": collection},
        result=result,
        metrics=METRICS,
        misses=[_miss(q, collection) for q in result["queries"] if q["rank"] != 1],
    )


def _miss(outcome: dict[str, Any], collection: str) -> dict[str, Any]:
    """A query whose expected document did not come first, with its playground URL."""
    args = {"q": outcome["query"], "mode": outcome["mode"]}
    if collection:
        args["collection"] = collection
    return {**outcome, "url": "/console/search?" + urlencode(args)}
