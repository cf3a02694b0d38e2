"""Form requests outside the console checked before they are parsed. A form from another
origin is refused (a page on any port of localhost could otherwise upload to a server
without keys): REST has no CORS, so no page of another origin has a use for sending one;
the OAuth server's own routes, which browser clients call across origins, are exempt. The
body is bounded: the REST upload at the upload cap, every other form (the OAuth server's
/token, /revoke and /authorize, or a form sent to any route) at a few fields' size, so no
form reaches the temp directory unbounded. The console checks its own forms, session
included (pgrag/web/form_gate.py)."""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from pgrag.errors import ErrorBody, ErrorCode
from pgrag.http.errors import RestErrorBody, send_rest_error
from pgrag.request_checks import MIB, SMALL_FORM_BYTES, is_form, same_origin, within
from pgrag.services.uploads import MAX_UPLOAD_BYTES

UPLOAD_PATH = "/api/documents"
# the file at the cap, plus its multipart framing and the collection field
UPLOAD_FORM_BYTES = MAX_UPLOAD_BYTES + MIB
CLOSE = ((b"connection", b"close"),)  # the unread body is not waited for


def form_limit(path: str) -> int:
    return UPLOAD_FORM_BYTES if path == UPLOAD_PATH else SMALL_FORM_BYTES


async def refuse_too_large(send: Send, limit: int) -> None:
    error = ErrorBody(
        code=ErrorCode.TOO_LARGE,
        message=f"the request body is over {limit} bytes, this route's bound",
        detail={"max_bytes": limit},
    )
    await send_rest_error(send, 413, RestErrorBody.of(error), CLOSE)


async def refuse_foreign(send: Send) -> None:
    error = ErrorBody(
        code=ErrorCode.FORBIDDEN,
        message="a form from another origin is not accepted: send the request from a "
        "client, not a web page",
    )
    await send_rest_error(send, 403, RestErrorBody.of(error), CLOSE)


class FormBounds:
    """ASGI middleware: a form from a foreign origin is refused 403 FORBIDDEN; a form body
    past its route's bound 413 TOO_LARGE, up front by its `Content-Length` or as soon as
    it streams past the bound."""

    def __init__(
        self, app: ASGIApp, skip: Callable[[str], bool], cross_origin: Callable[[str], bool]
    ) -> None:
        self.app = app
        self.skip = skip  # paths that check their own forms (the console)
        self.cross_origin = cross_origin  # paths browsers may call from other origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or not is_form(scope) or self.skip(path):
            await self.app(scope, receive, send)
            return
        if not self.cross_origin(path) and not same_origin(scope):
            await refuse_foreign(send)
            return
        await within(self.app, scope, receive, send, form_limit(path), refuse_too_large)
