"""The search playground: the search service with `explain` (what MCP `explain` returns),
each fused score's parts (pgrag.explain_parts) and the psql statement that replays the
ranking. A GET form: every search has a URL that reproduces it, its ranking knobs too."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, get_args

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from pgrag.search.counts import counted
from pgrag.search.flat import flat_values, from_flat
from pgrag.search.models import Fusion, SearchRequest, SearchScope
from pgrag.search.modes import SearchMode
from pgrag.services.evaluation import CASE_OPTIONS
from pgrag.services.overview import collection_names, file_types, reproduce_sql, score_parts
from pgrag.services.previews import has_pages
from pgrag.web.core import View, html_errors, view_of
from pgrag.web.i18n import MESSAGES
from pgrag.web.pages.why_not import why_not

router = APIRouter(include_in_schema=False)
Page = Annotated[View, Depends(view_of)]

# the knobs of the collapsed "Ranking" section; empty: the server's default
KNOB_FIELDS = (*CASE_OPTIONS, "document_ids")
FORM_FIELDS = (
    "q",
    "mode",
    "scope",
    "collection",
    "folder",
    "file_type",
    "metadata",
    "limit",
    "max_tokens",
    "why_not",
    *KNOB_FIELDS,
)
# the collapsed "Filters and options" section: the first result stays above the fold
MORE_FIELDS = ("scope", "collection", "folder", "file_type", "metadata", "max_tokens", "why_not")
# no mode: the default (hybrid), and a case saved from the page runs in every mode asked for
DEFAULTS = {"scope": "chunks", "limit": "10", "max_tokens": "4000"}
IDS = re.compile(r"[\s,]+")


@router.get("/console/search")
@html_errors
async def search_page(view: Page) -> Response:
    params = view.request.query_params
    form = {k: params.get(k, DEFAULTS.get(k, "")).strip() for k in FORM_FIELDS}
    values: dict[str, Any] = {
        "nav": "search",
        "form": form,
        "modes": [m.value for m in SearchMode],
        "scopes": get_args(SearchScope),
        "fusions": get_args(Fusion),
        "knobs_set": any(form[k] for k in KNOB_FIELDS),
        "filters_set": any(form[k] != DEFAULTS.get(k, "") for k in MORE_FIELDS),
        "reranks": view.context.search.reranker is not None,
        "collections": await collection_names(view.context.pool, view.scope),
        "file_types": await file_types(view.context.pool, view.scope),
        "back": f"{view.request.url.path}?{view.request.url.query}",
        "saved": params.get("saved", "")[:200],
        "previews": {},
    }
    if not form["q"]:
        return view.page("search.html", **values)
    # the form's fields, and any other field of the search request the URL names
    ids = [i for i in IDS.split(form["document_ids"]) if i]
    req = from_flat({**flat_values(params.getlist), **form, "document_ids": ids}, explain=True)
    caller = view.signed_in
    # under the guard of every console route (view_of): the caller's share, the time limit
    page = await view.context.search.search(req, collection_scope=caller.scope, caller=caller.name)
    data = page.data
    values.update(
        data=data,
        keywords=_keywords(data.results),
        shown_mode=_mode_label(req, MESSAGES[view.lang]),
        counted=counted(data, max(view.context.search.fusion.pool_size, req.limit)),
        previews=_previews(data.results),
        case_options=json.dumps(req.model_dump(mode="json", include=_chosen(req))),
    )
    if data.search_id is not None and req.spec.replayable and req.scope == "chunks":
        parts = await score_parts(view.context.pool, data.search_id)
        values.update(
            parts={p.chunk_id: p for p in parts},
            chart_max=max((p.fused_score for p in parts), default=0.0) or 1.0,
            sql=reproduce_sql(data.search_id),
        )
    if form["why_not"]:
        values["why"] = await why_not(view, req, data, form["why_not"])
    return view.page("search.html", **values)


def _chosen(req: SearchRequest) -> set[str]:
    """The case options the request set (a saved case keeps them, and only them)."""
    return {n for n in CASE_OPTIONS if n in req.model_fields_set}


def _mode_label(req: SearchRequest, t: dict[str, str]) -> str:
    """`exact` runs as keyword: shown as both, not as keyword alone."""
    ran = req.spec.name.value
    shown = t[f"mode_{ran}"]
    return shown if req.mode.value == ran else f"{shown} ({req.mode.value})"


def _keywords(hits: list[Any]) -> dict[int, list[str]]:
    """Each hit's matched words, for highlighting its snippets."""
    return {h.chunk_id: sorted({w for s in h.snippets for w in s.keywords_matched}) for h in hits}


def _previews(hits: list[Any]) -> dict[int, int]:
    """The page to show beside each hit of a PDF or an image: its location's page."""
    shown = {}
    for h in hits:
        if has_pages(h.path.rsplit(".", 1)[-1].lower()):
            shown[h.chunk_id] = h.location.page or 1
    return shown
