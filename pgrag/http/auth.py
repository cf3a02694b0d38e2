"""Bearer keys for HTTP: `PGRAG_API_KEYS="k1,k2=coll1|coll2"`. Every route but
/healthz needs a key when keys are configured; a key may be limited to collections."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from pgrag.http.jsonrpc import send_error
from pgrag.services.identity import set_identity

OPEN_PATHS = {"/healthz"}
MCP_PATHS = {"/mcp", "/sse"}
MCP_PREFIXES = ("/messages",)
UNAUTHORIZED = "Unauthorized: missing or unknown bearer key: send Authorization: Bearer <key>"


@dataclass(frozen=True)
class ApiKey:
    key: str
    collections: list[str] | None  # None: every collection

    @property
    def caller(self) -> str:
        return "key:" + hashlib.sha256(self.key.encode()).hexdigest()[:10]


def parse_api_keys(spec: str | None) -> list[ApiKey]:
    keys = []
    for part in (spec or "").split(","):
        part = part.strip()
        if not part:
            continue
        key, _, scope = part.partition("=")
        cols = [c.strip() for c in scope.split("|") if c.strip()] if scope else None
        keys.append(ApiKey(key.strip(), cols))
    return keys


class BearerAuth:
    """ASGI middleware: resolve the caller, set their collection scope for this request."""

    def __init__(
        self, app: ASGIApp, keys: list[ApiKey], own_auth: Callable[[str], bool] | None = None
    ) -> None:
        self.app = app
        self.keys = keys
        self.own_auth = own_auth  # paths that authenticate themselves (the web console)

    def _match(self, token: str) -> ApiKey | None:
        found = None
        for k in self.keys:  # compare every key: no early exit on a timing difference
            if hmac.compare_digest(k.key.encode(), token.encode()):
                found = k
        return found

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if not self.keys:
            set_identity("anonymous", None)
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        if path in OPEN_PATHS or (self.own_auth is not None and self.own_auth(path)):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"").decode("latin-1")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        key = self._match(token) if token else None
        if key is None:
            if path in MCP_PATHS or path.startswith(MCP_PREFIXES):
                await _unauthorized_jsonrpc(send, sent_key=bool(token))
            else:
                await _unauthorized(send)
            return
        set_identity(key.caller, key.collections)
        await self.app(scope, receive, send)


async def _unauthorized(send: Send) -> None:
    body = json.dumps(
        {
            "isError": True,
            "errorCode": "UNAUTHORIZED",
            "errorMessage": UNAUTHORIZED,
            "errorDetails": {},
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _unauthorized_jsonrpc(send: Send, *, sent_key: bool) -> None:
    """MCP clients read a JSON-RPC error body on any status: with it they can say that the
    key is missing or wrong instead of "Server returned an error response"."""
    await send_error(
        send,
        401,
        -32000,  # implementation-defined server error: JSON-RPC has no code for auth
        UNAUTHORIZED,
        data={"code": "UNAUTHORIZED", "reason": "unknown key" if sent_key else "no key"},
        headers=[(b"www-authenticate", b"Bearer")],
    )
