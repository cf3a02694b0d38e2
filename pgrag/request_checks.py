"""Checks of a form request made before its body is parsed: whether it comes from this
server's own origin (a form is a CORS simple request: any page can send one), and its body
read within a bound, refused up front when its `Content-Length` says it is too long and cut
off while it streams (chunked bodies declare no length) the moment it passes the bound.
Form parsers spool file parts to the temp directory as they read; bounding the body before
they run bounds what a request can put there. Shared by the REST and OAuth routes
(pgrag/http/form_bounds.py) and the console (pgrag/web/form_gate.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

KIB = 1024
MIB = 1024 * KIB
# a form of a few short fields (a key, a CSRF token, a choice): sign-in, consent, deletion
SMALL_FORM_BYTES = 64 * KIB
FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded", "text/plain")

Refuse = Callable[[Send, int], Awaitable[None]]  # answers 413 naming the bound


class BodyTooLarge(Exception):
    """The body passed its bound while being read (the parser reading it stops)."""


def header(scope: Scope, name: bytes) -> str:
    """One request header (the first), decoded as HTTP headers are: latin-1."""
    for key, value in scope.get("headers") or ():
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return ""


def is_form(scope: Scope) -> bool:
    """A body a browser form can send without a preflight, which Starlette parses as a form."""
    return header(scope, b"content-type").split(";")[0].strip().lower() in FORM_TYPES


def same_origin(scope: Scope) -> bool:
    """No browser header says the request came from another origin: `Origin`, when sent,
    names this server's host and port (a page on another port of localhost is another
    origin, though the same site); `Sec-Fetch-Site`, when sent, says same-origin."""
    origin = header(scope, b"origin")
    if origin and urlsplit(origin).netloc.lower() != header(scope, b"host").lower():
        return False
    return header(scope, b"sec-fetch-site").lower() in ("", "same-origin", "none")


def declared_length(scope: Scope) -> int | None:
    """The `Content-Length`, or None when there is none (chunked) or it is not a number."""
    value = header(scope, b"content-length").strip()
    return int(value) if value.isdigit() else None


async def within(
    app: ASGIApp, scope: Scope, receive: Receive, send: Send, limit: int, refuse: Refuse
) -> None:
    """Run `app` on a body of at most `limit` bytes; past it, `refuse` answers 413 (and
    whatever the app would have answered to its cut-off body is dropped)."""
    declared = declared_length(scope)
    if declared is not None and declared > limit:
        await refuse(send, limit)  # not one byte read
        return
    seen = 0
    over = False
    started = False

    async def counted() -> Message:
        nonlocal seen, over
        if over:
            raise BodyTooLarge()
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                over = True
                raise BodyTooLarge()
        return message

    async def answer(message: Message) -> None:
        nonlocal started
        if over and not started:
            return  # the app's answer to a body it could not finish reading
        started = started or message["type"] == "http.response.start"
        await send(message)

    try:
        await app(scope, counted, answer)
    except BodyTooLarge:
        pass
    except Exception:
        if not over:
            raise
    if over and not started:
        await refuse(send, limit)
