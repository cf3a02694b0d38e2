"""What every console route shares: who is calling (from the session cookie), in which
language, whether writes are allowed, and how a page or an error is answered."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ParamSpec

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError
from starlette.exceptions import HTTPException

from pgrag.errors import BudgetExceeded, ErrorCode, Forbidden, PgragError
from pgrag.services.auth_throttle import AuthThrottle
from pgrag.services.context import (
    SEARCH_TIMEOUT_S,
    AppContext,
    SharedContext,
    require_remote_writes,
)
from pgrag.services.guard import Call, Transport, guarded
from pgrag.services.identity import set_identity
from pgrag.settings import Settings
from pgrag.web import render
from pgrag.web.i18n import LANG_COOKIE, MESSAGES, NAMES, Lang, choose
from pgrag.web.session import (
    ANONYMOUS,
    COOKIE,
    MAX_AGE_S,
    Caller,
    Session,
    Sessions,
    csrf_ok,
)

log = logging.getLogger(__name__)
P = ParamSpec("P")
LOGIN_PATH = "/console/login"
ErrorHandler = Callable[[Request, Any], Response | Awaitable[Response]]  # Starlette's
PAGE_MARK = "pgrag_console_page"  # set on page routes' endpoints by html_errors
ACTION_TIMEOUT_S = 300.0  # a POST's limit: the longest action is an evaluation run
# what a route's failure may be besides a PgragError: FastAPI's and Starlette's own
REFUSALS: tuple[type[Exception], ...] = (RequestValidationError, HTTPException, ValidationError)


class SignInNeeded(Exception):
    """No valid session: pages redirect to sign-in, JSON endpoints answer 401."""


@dataclass
class Console:
    """Set up once by mount(): the server's settings, its sessions and context holder."""

    settings: Settings
    sessions: Sessions
    shared: SharedContext
    error_status: Mapping[ErrorCode, int]
    throttle: AuthThrottle  # failed sign-ins by address, shared with the bearer keys

    @property
    def writes(self) -> bool:
        """The REST rule for uploads and deletions, asked rather than repeated."""
        try:
            require_remote_writes(self.settings)
        except Forbidden:
            return False
        return True


@dataclass
class View:
    """One request's caller, language and session, and what its templates need."""

    console: Console
    request: Request
    session: Session
    caller: Caller | None
    lang: Lang
    fresh: bool  # the session is new: the response sets its cookie
    started: float = field(default_factory=time.perf_counter)
    call: Call | None = None  # the guarded call this request runs as (view_of)

    @property
    def context(self) -> AppContext:
        app = self.console.shared.context
        if app is None:
            raise PgragError("the server is starting", code=ErrorCode.DB_ERROR)
        return app

    @property
    def scope(self) -> list[str] | None:
        return self.signed_in.scope

    @property
    def signed_in(self) -> Caller:
        if self.caller is None:
            raise SignInNeeded()
        return self.caller

    def sign_in(self, key: str) -> str | None:
        """The fingerprint of a configured key, or None; an address past its budget of
        failed sign-ins is refused RATE_LIMITED before the key is compared."""
        sessions, throttle = self.console.sessions, self.console.throttle
        address = self.request.client.host if self.request.client else "-"
        throttle.check(address)
        key_id = sessions.match(key.strip()) if not sessions.closed else None
        if key_id is None:
            throttle.failed(address)
        return key_id

    def csrf_ok(self, token: str) -> bool:
        """The token of this request's session (a new session has none to match)."""
        return not self.fresh and csrf_ok(self.session, token)

    def posted(self, token: str) -> Caller:
        """A state-changing request: its session's CSRF token, then a signed-in caller."""
        if not self.csrf_ok(token):
            raise Forbidden("missing or wrong CSRF token: reload the page and try again")
        return self.signed_in

    def page(self, name: str, status: int = 200, **values: Any) -> Response:
        base = {
            "t": MESSAGES[self.lang],
            "lang": self.lang.value,
            "caller": self.caller,
            "sign_in_needed": self.console.sessions.sign_in_needed,
            "writes": self.console.writes,
            "csrf": self.session.csrf,
            "path": self.request.url.path,
            "here": here(self.request),
            "languages": NAMES,
            "oauth": getattr(self.request.app.state, "oauth_issuer", None) is not None,
        }
        return self.keep(render.page(name, {**base, **values}, status))

    def keep(self, response: Response) -> Response:
        """The response with the session cookie (when new) and the page's server time
        (`Server-Timing`, what benchmarks/load/console.py reads)."""
        elapsed_ms = (time.perf_counter() - self.started) * 1000
        response.headers["Server-Timing"] = f"page;dur={elapsed_ms:.1f}"
        if self.fresh:
            set_session(self.request, response, self.console.sessions.dump(self.session))
        return response

    def error(self, exc: PgragError) -> Response:
        status = self.console.error_status.get(exc.code, 500)
        return self.page("error.html", status, code=str(exc.code), message=exc.message)


def here(request: Request) -> str:
    """This page's path and query: where the language switch comes back to."""
    query = request.url.query
    return request.url.path + (f"?{query}" if query else "")


def set_session(request: Request, response: Response, value: str) -> None:
    """HttpOnly (no script reads it), SameSite=Strict (no other site sends it), Secure
    behind TLS."""
    response.set_cookie(
        COOKIE,
        value,
        max_age=MAX_AGE_S,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def _view(request: Request) -> View:
    """Who is calling (the session's key; before sign-in, the anonymous caller charged to
    its address) and in which language."""
    console: Console = request.app.state.console
    sessions = console.sessions
    session = sessions.load(request.cookies.get(COOKIE))
    fresh = session is None
    if session is None:
        session = sessions.new()
    lang = choose(request.headers.get("accept-language"), request.cookies.get(LANG_COOKIE))
    return View(console, request, session, sessions.caller(session), lang, fresh)


async def view_of(request: Request) -> AsyncIterator[View]:
    """Every console route's dependency: the caller's view, and the route run as a guarded
    call (admission, time limit, metrics, audit: pgrag/services/guard.py), as REST routes
    are."""
    view = _view(request)
    if view.caller is not None and view.caller is not ANONYMOUS:
        set_identity(view.caller.name, view.caller.scope)
    route = request.scope.get("route")
    call = Call(
        Transport.CONSOLE,
        f"{request.method} {getattr(route, 'path', request.url.path)}",
        {**request.query_params, **request.path_params},
    )
    timeout = SEARCH_TIMEOUT_S if request.method == "GET" else ACTION_TIMEOUT_S
    async with guarded(view.context, call, timeout, passthrough=REFUSALS) as view.call:
        yield view


def html_errors(
    handler: Callable[P, Awaitable[Response]],
) -> Callable[P, Awaitable[Response]]:
    """A page route: a service's error becomes the error page with REST's status for its
    code; a missing session, the sign-in page."""

    @functools.wraps(handler)
    async def wrapped(*args: P.args, **kwargs: P.kwargs) -> Response:
        view = next(a for a in (*args, *kwargs.values()) if isinstance(a, View))
        try:
            return await handler(*args, **kwargs)
        except SignInNeeded:
            return view.keep(RedirectResponse(LOGIN_PATH, status_code=303))
        except PgragError as exc:
            if exc.code == ErrorCode.INTERNAL:
                log.exception("console page failed")
            if view.call is not None:  # the page answers; the guard counts its code
                view.call.failed(str(exc.code), ran_out=isinstance(exc, BudgetExceeded))
            return view.error(exc)

    setattr(wrapped, PAGE_MARK, True)
    return wrapped


def is_page(request: Request) -> bool:
    """The request's route answers HTML (an `html_errors` route), not JSON."""
    endpoint = getattr(request.scope.get("route"), "endpoint", None)
    return bool(getattr(endpoint, PAGE_MARK, False))


def page_errors(
    fallback: ErrorHandler | None,
) -> Callable[[Request, Exception], Awaitable[Response]]:
    """The app's handler of PgragError: a page route refused before it ran or stopped by
    its time limit (the guard's RATE_LIMITED and TIMEOUT, raised around the route, where
    `html_errors` cannot catch them) answers the error page; the rest, `fallback` (REST's
    JSON body)."""

    async def handler(request: Request, exc: Exception) -> Response:
        if isinstance(exc, PgragError) and is_page(request):
            view = _view(request)
            response = view.error(exc)
            retry_after = exc.detail.get("retry_after_s")
            if retry_after is not None and response.status_code in (429, 503):
                response.headers["Retry-After"] = str(retry_after)
            return response
        if fallback is None:
            raise exc
        answer = fallback(request, exc)
        return await answer if isinstance(answer, Awaitable) else answer

    return handler
