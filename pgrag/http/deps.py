"""What a REST route depends on: the application context the HTTP app opened and the
caller's collection scope (set by BearerAuth for this request)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from pydantic import BeforeValidator

from pgrag.errors import ErrorCode, PgragError
from pgrag.services.context import AppContext, SharedContext
from pgrag.services.identity import current_account, current_scope


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


async def admitted(context: Context) -> AsyncIterator[None]:
    """The caller's share of slow work (services/admission): held or refused before the
    route runs, charged with what it took after."""
    async with context.admission.admitted(current_account()):
        yield
