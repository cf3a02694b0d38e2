"""What a REST route depends on: the application context the HTTP app opened and the
caller's collection scope (set by BearerAuth for this request)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BeforeValidator, ValidationError
from starlette.exceptions import HTTPException

from pgrag.errors import ErrorCode, PgragError
from pgrag.services.context import AppContext, SharedContext
from pgrag.services.guard import Call, Transport, guarded
from pgrag.services.identity import current_scope


def _whole_number(value: object) -> object:
    """A query string's number is text: "2" is a whole number, "2.0" is not (pydantic's lax
    mode would take it, and the OpenAPI document promises an integer)."""
    if isinstance(value, str) and not re.fullmatch(r"[+-]?[0-9]+", value.strip()):
        raise ValueError("must be a whole number")
    return value


# an integer query parameter that refuses "2.0" and "1e3"
QueryInt = Annotated[int, BeforeValidator(_whole_number)]


def shared_context(request: Request) -> SharedContext:
    """The holder create_app put on the app; filled while the app's lifespan runs."""
    shared: SharedContext = request.app.state.shared
    return shared


async def app_context(request: Request) -> AppContext:
    """The context; 503 DB_ERROR while the server is still starting (or stopping)."""
    context = shared_context(request).context
    if context is None:
        raise PgragError("the server is starting", code=ErrorCode.DB_ERROR)
    return context


async def caller_scope() -> list[str] | None:
    """Collections the caller may read (None = all). Async: it runs in the request's own
    task, where BearerAuth set the identity."""
    return current_scope()


Context = Annotated[AppContext, Depends(app_context)]
Scope = Annotated[list[str] | None, Depends(caller_scope)]


# what a route's failure may be besides a PgragError: FastAPI's and Starlette's own
REFUSALS: tuple[type[Exception], ...] = (RequestValidationError, HTTPException, ValidationError)


def guard(timeout: float) -> Any:
    """A router's dependency: each of its routes runs as a guarded call (admission, the
    time limit, metrics and audit: pgrag/services/guard.py)."""

    async def guarded_route(request: Request, context: Context) -> AsyncIterator[None]:
        call = Call(Transport.REST, route_name(request), route_arguments(request))
        async with guarded(context, call, timeout, passthrough=REFUSALS):
            yield

    return Depends(guarded_route, scope="function")


def route_name(request: Request) -> str:
    """ "GET /api/documents/{document_id}": the route's template, never the caller's path."""
    route = request.scope.get("route")
    return f"{request.method} {getattr(route, 'path', request.url.path)}"


def route_arguments(request: Request) -> dict[str, Any]:
    return {**request.query_params, **request.path_params}
