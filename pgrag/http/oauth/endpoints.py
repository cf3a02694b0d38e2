"""What pgrag puts around the SDK's open OAuth endpoints, which any stranger can call:

- /register: a small body, a budget of registrations per client address and hour, and a
  cap on clients nobody approved yet (services/oauth_tokens.py), answered 413 and 429;
- /authorize: a client ID metadata document that cannot be used is explained, to a browser
  on a page of its own (the SDK would answer raw JSON "Client ID … not found"), to any
  other caller in the JSON error's description;
- /revoke: public clients (`token_endpoint_auth_method: none`, as the MCP SDKs register)
  may revoke without the empty `client_secret` field the SDK's form demands."""

from __future__ import annotations

import html
import json
import time
from typing import Any

from mcp.server.auth.middleware.client_auth import AuthenticationError, ClientAuthenticator
from mcp.server.auth.provider import OAuthAuthorizationServerProvider
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pgrag.http.oauth.client_documents import last_refusal

MAX_REGISTRATION_BYTES = 8 * 1024
WINDOW_S = 3600
MAX_TRACKED = 10_000  # addresses the budget remembers at once
PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"


class ClientCapReached(Exception):
    """Raised through the SDK's registration handler to RegistrationGuard (a PgragError
    would be answered by the REST error handlers in REST's shape first)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def client_address(scope: Scope) -> str:
    """The caller's address as the server sees it (uvicorn applies trusted proxy headers)."""
    client = scope.get("client")
    return str(client[0]) if client else "-"


async def _send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
    headers.append((b"content-length", str(len(data)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


class Budget:
    """So many events per address and window (in memory, per process)."""

    def __init__(self, per_window: int, window_s: int = WINDOW_S) -> None:
        self.per_window = per_window
        self.window_s = window_s
        self._seen: dict[str, tuple[float, int]] = {}

    def spend(self, address: str) -> bool:
        """Count one event; False when the address has spent its budget."""
        now = time.monotonic()
        if len(self._seen) >= MAX_TRACKED:
            self._seen = {a: w for a, w in self._seen.items() if now - w[0] < self.window_s}
        start, used = self._seen.get(address, (now, 0))
        if now - start >= self.window_s:
            start, used = now, 0
        if used >= self.per_window:
            return False
        self._seen[address] = (start, used + 1)
        return True


class RegistrationGuard:
    """/register, bounded: body size, a budget per address, the unapproved-client cap."""

    def __init__(self, app: ASGIApp, budget: Budget) -> None:
        self.app = app
        self.budget = budget

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        if not self.budget.spend(client_address(scope)):
            await _send_json(send, 429, _error("too many registrations from this address"))
            return
        body = await _bounded_body(scope, receive)
        if body is None:
            message = f"the registration is larger than {MAX_REGISTRATION_BYTES} bytes"
            await _send_json(send, 413, _error(message))
            return
        started = False

        async def replay() -> Message:
            nonlocal body
            chunk, body = body, b""
            return {"type": "http.request", "body": chunk, "more_body": False}

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, replay, watch)
        except ClientCapReached as exc:
            if started:
                raise
            await _send_json(send, 429, _error(exc.message))


def _error(description: str) -> dict[str, str]:
    return {"error": "invalid_client_metadata", "error_description": description}


async def _bounded_body(scope: Scope, receive: Receive) -> bytes | None:
    """The request body, or None past MAX_REGISTRATION_BYTES (read no further)."""
    for name, value in scope.get("headers") or []:
        if name == b"content-length" and value.isdigit() and int(value) > MAX_REGISTRATION_BYTES:
            return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_REGISTRATION_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class AuthorizePage:
    """/authorize: when a client ID metadata document was refused, the browser gets a page
    saying why (the reason is the server's own words, escaped), not the SDK's JSON."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        reasons: list[str] = []
        token = last_refusal.set(reasons)
        replaced = False
        browser = b"text/html" in dict(scope.get("headers") or []).get(b"accept", b"")

        async def explain(message: Message) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and reasons and message["status"] == 400:
                replaced = True
                if browser:
                    await _refusal_page(send, reasons[-1])
                else:
                    body = {"error": "invalid_request", "error_description": reasons[-1]}
                    await _send_json(send, 400, body)
            elif not replaced:
                await send(message)

        try:
            await self.app(scope, receive, explain)
        finally:
            last_refusal.reset(token)


async def _refusal_page(send: Send, reason: str) -> None:
    body = (
        "<!doctype html><html lang=en><meta charset=utf-8><title>Client refused</title>"
        "<body style='font-family:sans-serif;max-width:40em;margin:3em auto'>"
        "<h1>This client cannot sign in</h1>"
        f"<p>pgrag could not use the client's metadata document: {html.escape(reason)}.</p>"
        "<p>Tell the client's maker, or register the client instead.</p></body></html>"
    ).encode()
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"content-security-policy", PAGE_CSP.encode()),
        (b"cache-control", b"no-store"),
    ]
    await send({"type": "http.response.start", "status": 400, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class PublicRevocation:
    """RFC 7009 revocation for every client the server registers, public ones included."""

    def __init__(self, provider: OAuthAuthorizationServerProvider[Any, Any, Any]) -> None:
        self.provider = provider
        self.clients = ClientAuthenticator(provider)

    async def handle(self, request: Request) -> Response:
        try:
            client = await self.clients.authenticate_request(request)
        except AuthenticationError as exc:
            body = {"error": "invalid_client", "error_description": exc.message}
            return Response(json.dumps(body), 401, media_type="application/json")
        form = await request.form()
        token = form.get("token")
        if not isinstance(token, str) or not token:
            body = {"error": "invalid_request", "error_description": "token is required"}
            return Response(json.dumps(body), 400, media_type="application/json")
        found = await self.provider.load_access_token(token)
        if found is None:
            found = await self.provider.load_refresh_token(client, token)
        if found is not None and found.client_id == client.client_id:
            await self.provider.revoke_token(found)
        # an unknown token is revoked already, as far as the client can tell (RFC 7009 §2.2)
        return Response(status_code=200, headers={"Cache-Control": "no-store"})
