"""The search log page: recent searches by caller, mode and collection with their result
counts, p50/p95 latency per hour, the searches that found nothing, each linked back to the
playground. The service (services/search_log.py) holds a limited key to its own searches."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from pydantic import ValidationError

from pgrag.errors import InvalidArgument
from pgrag.services.search_log import LogFilter, LoggedSearch, search_log
from pgrag.web.core import View, html_errors, view_of

router = APIRouter(include_in_schema=False)
Page = Annotated[View, Depends(view_of)]
FILTERS = ("caller", "mode", "collection")
# logged ranking arguments a playground link repeats (the search request's names)
KNOBS = {"fusion": "fusion", "rrf_k": "rrf_k", "min_similarity": "threshold"}
WEIGHTS = ("lexical_weight", "semantic_weight")  # 0: the mode switched the leg off
FILTER_KEYS = ("folder", "file_type", "document_ids", "date_from", "date_to", "tags")


@router.get("/console/searches")
@html_errors
async def search_log_page(view: Page) -> Response:
    params = view.request.query_params
    form = {k: params.get(k, "").strip() for k in FILTERS}
    try:
        asked = LogFilter.model_validate({k: v for k, v in form.items() if v})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InvalidArgument(f"{err['loc'][0]}: {err['msg']}") from None
    caller = view.signed_in
    log = await search_log(view.context.pool, asked, caller=caller.name, scope=caller.scope)
    return view.page(
        "searches.html",
        nav="searches",
        form=form,
        log=log,
        again={s.id: playground_url(s) for s in [*log.recent, *log.empty]},
    )


def playground_url(s: LoggedSearch) -> str:
    """The playground URL that runs a logged search again: query, mode, scope, limit, the
    collection it was restricted to and the filters and ranking options it was sent."""
    p = s.params
    q: list[tuple[str, Any]] = [("q", s.query), ("mode", s.mode), ("scope", s.scope)]
    if p.get("match_count"):
        q.append(("limit", p["match_count"]))
    if len(s.collections) == 1:
        q.append(("collection", s.collections[0]))
    filters = p.get("filters") or {}
    for key in FILTER_KEYS:
        value = filters.get(key)
        if isinstance(value, list):
            q += [(key, v) for v in value] if key != "document_ids" else [(key, ",".join(value))]
        elif value is not None:
            q.append((key, value))
    q += [(name, p[logged]) for logged, name in KNOBS.items() if p.get(logged) is not None]
    q += [(w, p[w]) for w in WEIGHTS if p.get(w)]
    return "/console/search?" + urlencode(q)
