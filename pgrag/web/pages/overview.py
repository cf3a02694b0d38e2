"""The overview: collections at a glance, ingestion activity (polled as JSON by
static/activity.js, no reload), and the doctor's checks on demand."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from pgrag.doctor import run_checks
from pgrag.jsonable import jsonable
from pgrag.services.overview import overview
from pgrag.services.status import report_for
from pgrag.web import render
from pgrag.web.core import View, html_errors, view_of

router = APIRouter(include_in_schema=False)
Page = Annotated[View, Depends(view_of)]


async def _activity(view: View) -> dict[str, object]:
    report: dict[str, object] = jsonable(await report_for(view.context.pool, view.scope))
    return report


@router.get("/")
@html_errors
async def overview_page(view: Page) -> Response:
    summary = await overview(view.context.pool, view.scope)
    return view.page(
        "overview.html",
        nav="overview",
        summary=summary,
        activity=await _activity(view),
        model=view.context.provider.model,
    )


@router.get("/console/activity.json")
async def activity(view: Page) -> Response:
    """What the overview's activity panel polls: REST /api/status's report."""
    if view.caller is None:
        return render.data({"isError": True, "errorCode": "UNAUTHORIZED"}, 401)
    return view.keep(render.data(await _activity(view)))


@router.get("/console/doctor")
@html_errors
async def doctor_page(view: Page) -> Response:
    """`pgrag doctor`'s checks with this server's settings; for keys that read every
    collection (the checks name every collection and the database's address)."""
    checks = None
    if view.scope is None:
        settings = view.console.settings.model_dump(exclude_unset=True)
        checks = [dataclasses.asdict(c) for c in await run_checks(settings)]
    return view.page("doctor.html", nav="overview", checks=checks)
