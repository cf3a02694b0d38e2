""" "Save as evaluation case" from the playground: a result's query, document and location
become a case of a stored set, in the `pgrag eval` format, with the mode and ranking options
the user chose (only those: a case without a mode runs in every mode of a run). The answer
is the results page again, so that several hits are saved without searching again."""

from __future__ import annotations

import json
from typing import Annotated
from urllib.parse import parse_qsl, urlencode, urlsplit

from fastapi import APIRouter, Depends, Form
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError

from pgrag.errors import InvalidArgument
from pgrag.services.eval_sets import save_cases
from pgrag.services.evaluation import EvalQuery
from pgrag.web.core import View, html_errors, view_of
from pgrag.web.pages.evaluation import Name, checked_post

router = APIRouter(include_in_schema=False)
SEARCH_PATH = "/console/search"
SAVED = "saved"  # the results page's parameter naming the set a case went to
Page = Annotated[View, Depends(view_of)]


@router.post("/console/eval/cases")
@html_errors
async def save_case(
    view: Page,
    csrf: Annotated[str, Form(max_length=200)] = "",
    set_name: Annotated[str, Form(alias="set", max_length=200)] = "",
    query: Annotated[str, Form(max_length=4000)] = "",
    document: Annotated[str, Form(max_length=1000)] = "",
    location: Annotated[str, Form(max_length=2000)] = "{}",
    mode: Name = "",
    options: Annotated[str, Form(max_length=2000)] = "{}",
    category: Name = "",
    back: Annotated[str, Form(max_length=30000)] = "",
) -> Response:
    checked_post(view, csrf)
    try:
        case = EvalQuery.model_validate(
            {
                "query": query,
                "document": document,
                "location": json.loads(location) or None,
                "mode": mode or None,
                "options": json.loads(options) or None,
                "category": category or None,
            }
        )
    except (ValidationError, ValueError) as exc:
        raise InvalidArgument(f"not an evaluation case: {exc}") from None
    await save_cases(view.context.pool, set_name, [case], view.signed_in.name)
    saved = {"set": set_name.strip()}
    return RedirectResponse(_results_page(back, saved) or "/console/eval?" + urlencode(saved), 303)


def _results_page(back: str, saved: dict[str, str]) -> str | None:
    """The playground URL the case was saved from, saying where it went; None for any
    other address (no open redirect)."""
    url = urlsplit(back)
    if url.scheme or url.netloc or url.path != SEARCH_PATH:
        return None
    kept = [(k, v) for k, v in parse_qsl(url.query, keep_blank_values=True) if k != SAVED]
    return f"{SEARCH_PATH}?{urlencode([*kept, (SAVED, saved['set'])])}"
