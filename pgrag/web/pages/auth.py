"""Sign-in and sign-out: an API key posted in a form (never in a URL), exchanged for a
session cookie; both forms carry the CSRF token of the session they replace. Sign-out ends
the session on the server, not only in the browser."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form
from fastapi.responses import RedirectResponse, Response

from pgrag.web.core import View, set_session, view_of
from pgrag.web.session import COOKIE

router = APIRouter(include_in_schema=False)
Page = Annotated[View, Depends(view_of)]


@router.get("/console/login")
async def login_form(view: Page) -> Response:
    if view.caller is not None:
        return RedirectResponse("/", status_code=303)
    return view.page("login.html", closed=view.console.sessions.closed)


@router.post("/console/login")
async def login(
    view: Page,
    key: Annotated[str, Form(max_length=1000)] = "",
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    sessions = view.console.sessions
    if not view.csrf_ok(csrf):
        return view.page("login.html", 403, closed=sessions.closed, refused=True)
    key_id = view.sign_in(key)
    if key_id is None:
        return view.page("login.html", 401, closed=sessions.closed, unknown=True)
    response = RedirectResponse("/", status_code=303)
    set_session(view.request, response, sessions.dump(sessions.new(key_id)))
    return response


@router.post("/console/logout")
async def logout(view: Page, csrf: Annotated[str, Form(max_length=200)] = "") -> Response:
    if not view.csrf_ok(csrf):
        return view.page("error.html", 403, code="FORBIDDEN", message="missing CSRF token")
    view.console.sessions.end(view.session)  # a copy of the cookie is refused too
    response = RedirectResponse("/console/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response
