"""The search playground: the search service with `explain` (what MCP `explain` returns),
each fused score's parts (pgrag.explain_parts) and the psql statement that replays the
ranking. A GET form: every search has a URL that reproduces it."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, get_args

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from pydantic import ValidationError

from pgrag.errors import InvalidArgument
from pgrag.search.models import SearchRequest, SearchScope, metadata_pairs
from pgrag.search.modes import SearchMode
from pgrag.services.context import SEARCH_TIMEOUT_S
from pgrag.services.overview import reproduce_sql, score_parts
from pgrag.web.core import View, html_errors, view_of
from pgrag.web.pages.why_not import why_not

router = APIRouter(include_in_schema=False)
Page = Annotated[View, Depends(view_of)]

FORM_FIELDS = (
    "q",
    "mode",
    "scope",
    "collection",
    "folder",
    "file_type",
    "where",
    "limit",
    "max_tokens",
    "why_not",
)
DEFAULTS = {"mode": "hybrid", "scope": "chunks", "limit": "10", "max_tokens": "4000"}


def _request(form: dict[str, str]) -> SearchRequest:
    filters: dict[str, Any] = {
        k: form[k] for k in ("collection", "folder", "file_type") if form.get(k)
    }
    if form.get("where"):
        filters["metadata"] = metadata_pairs([form["where"]])
    try:
        return SearchRequest.model_validate(
            {
                "query": form["q"],
                "mode": form["mode"],
                "scope": form["scope"],
                "limit": form["limit"],
                "max_tokens": form["max_tokens"],
                "filters": filters,
                "explain": True,
            }
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        name = ".".join(str(p) for p in err["loc"]) or "query"
        raise InvalidArgument(f"{name}: {err['msg']}", detail={"field": name}) from None


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
    }
    if not form["q"]:
        return view.page("search.html", **values)
    req = _request(form)
    caller = view.signed_in
    page = await asyncio.wait_for(
        view.context.search.search(req, collection_scope=caller.scope, caller=caller.name),
        SEARCH_TIMEOUT_S,
    )
    data = page.data
    values.update(data=data, keywords=_keywords(data.results))
    if data.search_id is not None and not req.spec.pattern and req.scope == "chunks":
        parts = await score_parts(view.context.pool, data.search_id)
        values.update(
            parts={p.chunk_id: p for p in parts},
            chart_max=max((p.fused_score for p in parts), default=0.0) or 1.0,
            sql=reproduce_sql(data.search_id),
        )
    if form["why_not"]:
        values["why"] = await why_not(view, req, data, form["why_not"])
    return view.page("search.html", **values)


def _keywords(hits: list[Any]) -> dict[int, list[str]]:
    """Each hit's matched words, for highlighting its snippets."""
    return {h.chunk_id: sorted({w for s in h.snippets for w in s.keywords_matched}) for h in hits}
