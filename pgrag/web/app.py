"""Mounting the console on the HTTP app: its routes, its static files and its sessions.
The console authenticates its own requests (session cookie), so the bearer middleware
leaves the paths `owns` names to it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from pgrag.errors import ErrorCode, PgragError
from pgrag.services.auth_throttle import AuthThrottle
from pgrag.services.context import SharedContext
from pgrag.settings import Settings
from pgrag.web.core import Console, page_errors
from pgrag.web.form_gate import FormGate
from pgrag.web.pages import (
    auth,
    consent,
    documents,
    eval_cases,
    evaluation,
    language,
    originals,
    overview,
    search,
    search_log,
    upload,
)
from pgrag.web.session import KeyLike, Sessions

STATIC = Path(__file__).parent / "static"


def owns(path: str) -> bool:
    """The console's paths: / and everything under /console/."""
    return path == "/" or path.startswith("/console/")


def mount(
    app: FastAPI,
    settings: Settings,
    shared: SharedContext,
    *,
    keys: Sequence[KeyLike],
    loopback: bool,
    error_status: Mapping[ErrorCode, int],
    throttle: AuthThrottle,
) -> None:
    sessions = Sessions(keys, loopback=loopback)
    app.state.console = Console(settings, sessions, shared, error_status, throttle)
    for router in (
        overview.router,
        auth.router,
        language.router,
        consent.router,
        search.router,
        search_log.router,
        documents.router,
        originals.router,
        evaluation.router,
        eval_cases.router,
        upload.router,
    ):
        app.include_router(router)
    # a page refused or timed out by its guard answers the error page, not REST's JSON
    app.add_exception_handler(PgragError, page_errors(app.exception_handlers.get(PgragError)))
    app.mount("/console/static", StaticFiles(directory=STATIC), name="console-static")
    # the console's forms: origin and session checked, then the body read within its bound
    app.add_middleware(FormGate, sessions=sessions, owns=owns)
