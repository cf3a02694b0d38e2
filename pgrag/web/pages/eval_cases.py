""" "Save as evaluation case" from the playground: a result's query, document and location
become a case of a stored set, in the `pgrag eval` format."""

from __future__ import annotations

import json
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError

from pgrag.errors import InvalidArgument
from pgrag.services.eval_sets import save_cases
from pgrag.services.evaluation import EvalQuery
from pgrag.web.core import View, html_errors, view_of
from pgrag.web.pages.evaluation import Name, checked_post

router = APIRouter(include_in_schema=False)
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
    category: Name = "",
) -> Response:
    checked_post(view, csrf)
    try:
        case = EvalQuery.model_validate(
            {
                "query": query,
                "document": document,
                "location": json.loads(location) or None,
                "mode": mode or None,
                "category": category or None,
            }
        )
    except (ValidationError, ValueError) as exc:
        raise InvalidArgument(f"not an evaluation case: {exc}") from None
    await save_cases(view.context.pool, set_name, [case], view.signed_in.name)
    return RedirectResponse("/console/eval?" + urlencode({"set": set_name.strip()}), 303)
