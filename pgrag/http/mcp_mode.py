"""Streamable HTTP calls answered as one JSON body unless the caller asked for progress.

Stateless Streamable HTTP may answer a POST with a JSON body or with an SSE stream. The
stream costs the server a writer task and an event encoder per request, about a quarter of
a search's server CPU (benchmarks/load/load.py), and carries nothing more unless the request
holds a progress token (params._meta.progressToken, read from the parsed message, and the
client accepts a stream): only then can anything (progress notifications) come before the
result. So such requests go to the streaming transport and every other POST to the JSON
one; malformed messages are answered before either (jsonrpc.py). Both are the SDK's own
transports on the same server; this only picks one per request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

from pgrag.http.jsonrpc import Checked, check_post, send_error
from pgrag.services.identity import may_write

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


class ResponseModeRouter:
    def __init__(
        self,
        json_app: ASGIApp,
        stream_app: ASGIApp,
        *,
        max_peek_bytes: int = DEFAULT_MAX_REQUEST_BODY_SIZE,
        scope_check: ScopeCheck | None = None,
    ) -> None:
        self.json_app = json_app
        self.stream_app = stream_app
        self.max_peek_bytes = max_peek_bytes
        self.scope_check = scope_check

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.stream_app(scope, receive, send)
            return
        messages, body, complete = await _peek_body(receive, self.max_peek_bytes)
        replay = _replaying(messages, receive)
        if not complete:  # oversized or disconnected: the streaming app applies its limits
            await self.stream_app(scope, replay, send)
            return
        checked = check_post(scope, body)
        if checked.rejection is not None:
            r = checked.rejection
            await send_error(send, r.status, r.code, r.message, id=r.id)
            return
        if self.scope_check is not None and await self.scope_check.refused(checked, send):
            return
        await (self.stream_app if checked.wants_progress else self.json_app)(scope, replay, send)


class ScopeCheck:
    """A write tool called with a token granted read access only: HTTP 403 with
    `WWW-Authenticate: Bearer error="insufficient_scope"` (RFC 6750 §3.1, the MCP spec's
    step-up), so a client can ask the owner for write access; not a 200 with a tool error."""

    def __init__(self, write_tools: Callable[[], Awaitable[frozenset[str]]], challenge: bytes):
        self.write_tools = write_tools
        self.challenge = challenge
        self._names: frozenset[str] | None = None

    async def refused(self, checked: Checked, send: Send) -> bool:
        if checked.tool is None or may_write():
            return False
        if self._names is None:
            self._names = await self.write_tools()
        if checked.tool not in self._names:
            return False
        await send_error(
            send,
            403,
            -32000,  # implementation-defined server error, as for 401
            "this token was granted read access only (scope pgrag:write missing): approve "
            "the client again with write access",
            id=checked.id,
            data={"code": "FORBIDDEN", "error": "insufficient_scope", "scope": "pgrag:write"},
            headers=[(b"www-authenticate", self.challenge)],
        )
        return True


class ScopeGate:
    """The ScopeCheck in front of the legacy SSE transport's POST /messages."""

    def __init__(self, app: ASGIApp, check: ScopeCheck) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or may_write():
            await self.app(scope, receive, send)
            return
        messages, body, complete = await _peek_body(receive, DEFAULT_MAX_REQUEST_BODY_SIZE)
        if complete and await self.check.refused(check_post(scope, body), send):
            return
        await self.app(scope, _replaying(messages, receive), send)


async def _peek_body(receive: Receive, limit: int) -> tuple[list[Message], bytes, bool]:
    """The request's messages read so far, its body, and whether the body is whole."""
    messages: list[Message] = []
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, b"", False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return messages, b"".join(chunks), True
        if size > limit:
            return messages, b"", False


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
