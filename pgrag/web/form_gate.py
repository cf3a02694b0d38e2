"""The console's state-changing requests checked before their bodies are read.

A form body is parsed (and its file parts spooled to the temp directory) before any route
code runs, so the checks a route makes come too late to protect the disk. This gate runs
first, on headers alone: the request comes from the console's own origin (a page on
another port of localhost is another origin, though the same site), it carries a live
session cookie, and, except on the sign-in forms, that session is signed in. Only then is
the body read, within its route's bound (a few fields; the query files of an evaluation;
the upload cap for uploads). The CSRF token in the body is still checked by each route."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from pgrag.errors import ErrorCode
from pgrag.request_checks import MIB, SMALL_FORM_BYTES, header, same_origin, within
from pgrag.services.uploads import MAX_UPLOAD_BYTES
from pgrag.web import render
from pgrag.web.i18n import LANG_COOKIE, MESSAGES, choose
from pgrag.web.pages.evaluation import MAX_FILE_BYTES
from pgrag.web.session import COOKIE, Sessions

LOGIN_PATH = "/console/login"
SIGN_IN_FORMS = frozenset({LOGIN_PATH, "/console/logout", "/console/oauth/consent/signin"})
BODYLESS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class Bound:
    path: re.Pattern[str]
    max_bytes: int


# a console form not named here is a few fields (SMALL_FORM_BYTES)
BOUNDS = (
    # the files of one upload together, plus their multipart framing and fields
    Bound(re.compile(r"/console/upload"), MAX_UPLOAD_BYTES + MIB),
    # pasted queries and a query file, each at its cap
    Bound(re.compile(r"/console/eval"), 2 * MAX_FILE_BYTES + SMALL_FORM_BYTES),
)


def form_limit(path: str) -> int:
    return next((b.max_bytes for b in BOUNDS if b.path.fullmatch(path)), SMALL_FORM_BYTES)


class FormGate:
    """ASGI middleware over the console's paths (`owns`): refuses a foreign origin or a
    request without a session (403), sends a signed-out one to sign-in (303), and reads
    what passes within its bound (413 TOO_LARGE past it)."""

    def __init__(self, app: ASGIApp, sessions: Sessions, owns: Callable[[str], bool]) -> None:
        self.app = app
        self.sessions = sessions
        self.owns = owns

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or scope.get("method") in BODYLESS or not self.owns(path):
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope, path)
        if refusal is not None:
            await refusal(scope, receive, send)
            return

        async def too_large(send: Send, limit: int) -> None:
            message = f"the form is over {render.human_bytes(limit)}, this page's bound"
            await _error(scope, 413, ErrorCode.TOO_LARGE, message)(scope, receive, send)

        await within(self.app, scope, receive, send, form_limit(path), too_large)

    def refusal(self, scope: Scope, path: str) -> Response | None:
        """What answers the request before its body is read; None: read it."""
        if not same_origin(scope):
            message = "a console form is accepted from the console's own pages only"
            return _error(scope, 403, ErrorCode.FORBIDDEN, message)
        session = self.sessions.load(Request(scope).cookies.get(COOKIE))
        if session is None:
            message = "no session (or it ended): reload the page and try again"
            return _error(scope, 403, ErrorCode.FORBIDDEN, message)
        if path not in SIGN_IN_FORMS and self.sessions.caller(session) is None:
            return RedirectResponse(LOGIN_PATH, status_code=303, headers={"Connection": "close"})
        return None


def _error(scope: Scope, status: int, code: ErrorCode, message: str) -> Response:
    lang = choose(header(scope, b"accept-language"), Request(scope).cookies.get(LANG_COOKIE))
    values = {"t": MESSAGES[lang], "lang": lang.value, "caller": None}
    response = render.page("error.html", {**values, "code": str(code), "message": message}, status)
    response.headers["Connection"] = "close"  # the unread body is not waited for
    return response
