"""Bearer keys for HTTP: `PGRAG_API_KEYS="k1,k2=coll1|coll2"`. Every route but
/healthz needs a key when keys are configured; a key may be limited to collections.
With OAuth on (pgrag/http/oauth) an access token is accepted too, limited to its grant's
collections and scopes; its metadata and token endpoints are open."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from pgrag.config.oauth import OAuthSettings
from pgrag.errors import ErrorBody, ErrorCode
from pgrag.http.errors import RestErrorBody, send_rest_error
from pgrag.http.jsonrpc import send_error
from pgrag.http.oauth.gate import OAuthGate
from pgrag.services.auth_throttle import AuthThrottle, TooManyFailures
from pgrag.services.caller_names import keyed
from pgrag.services.identity import set_identity, set_may_write

OPEN_PATHS = {"/healthz"}
MCP_PATHS = {"/mcp", "/sse"}
MCP_PREFIXES = ("/messages",)
UNAUTHORIZED = "Unauthorized: missing or unknown bearer key: send Authorization: Bearer <key>"
WRITE_PREFIX = "/api/documents"  # REST uploads and deletions need the write scope
WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


@dataclass(frozen=True)
class ApiKey:
    key: str
    collections: list[str] | None  # None: every collection

    @property
    def caller(self) -> str:
        """The key's audit name: a keyed hash (services/caller_names.py), never a digest."""
        return keyed("key", self.key)


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


def admin_keys(settings: OAuthSettings) -> list[ApiKey]:
    """The admin password as a console sign-in with full access (never a bearer key)."""
    password = settings.admin_password
    return [ApiKey(password.get_secret_value(), None)] if password else []


class BearerAuth:
    """ASGI middleware: resolve the caller, set their collection scope for this request."""

    def __init__(
        self,
        app: ASGIApp,
        keys: list[ApiKey],
        own_auth: Callable[[str], bool] | None = None,
        oauth: OAuthGate | None = None,
        throttle: AuthThrottle | None = None,
    ) -> None:
        self.app = app
        self.keys = keys
        self.throttle = throttle or AuthThrottle()
        self.own_auth = own_auth  # paths that authenticate themselves (the web console)
        self.oauth = oauth

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
        set_may_write(True)
        # until a key or token names the caller: anonymous, charged to its address (the
        # peer's, or what a configured proxy forwarded: uvicorn rewrites `client` for
        # PGRAG_TRUSTED_PROXIES only, pgrag.http.app.run_http)
        client = scope.get("client")
        address = client[0] if client else "-"
        set_identity("anonymous", None, f"address:{address}")
        if not self.keys and self.oauth is None:
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        if (
            path in OPEN_PATHS
            or (self.own_auth is not None and self.own_auth(path))
            or (self.oauth is not None and self.oauth.is_open(path))
        ):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"").decode("latin-1")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        if token:  # a guess over the address's budget is refused before it is compared
            try:
                self.throttle.check(address)
            except TooManyFailures as exc:
                await _throttled(send, exc)
                return
        key = self._match(token) if token else None
        if key is not None:
            set_identity(key.caller, key.collections)
            await self.app(scope, receive, send)
            return
        oauth = self.oauth
        principal = await oauth.verify(token) if oauth is not None and token else None
        if oauth is None or principal is None:
            if token:
                self.throttle.failed(address)
            challenge = oauth.challenge("invalid_token" if token else None) if oauth else b"Bearer"
            if path in MCP_PATHS or path.startswith(MCP_PREFIXES):
                await _unauthorized_jsonrpc(send, sent_key=bool(token), challenge=challenge)
            else:
                await _unauthorized(send, challenge)
            return
        if not principal.may_write and _writes(scope, path):
            await _insufficient_scope(send, oauth)
            return
        set_identity(principal.caller, principal.collections)
        set_may_write(principal.may_write)
        await self.app(scope, receive, send)


async def _throttled(send: Send, exc: TooManyFailures) -> None:
    """429 RATE_LIMITED with Retry-After, in REST's error body (MCP clients read it too)."""
    retry = str(exc.detail["retry_after_s"])
    body = RestErrorBody.of(ErrorBody(code=exc.code, message=exc.message, detail=exc.detail))
    await send_rest_error(send, 429, body, ((b"retry-after", retry.encode()),))


def _writes(scope: Scope, path: str) -> bool:
    return path.startswith(WRITE_PREFIX) and scope.get("method") in WRITE_METHODS


async def _unauthorized(send: Send, challenge: bytes) -> None:
    error = RestErrorBody(
        isError=True, errorCode="UNAUTHORIZED", errorMessage=UNAUTHORIZED, errorDetails={}
    )
    await send_rest_error(send, 401, error, ((b"www-authenticate", challenge),))


async def _insufficient_scope(send: Send, oauth: OAuthGate) -> None:
    """403 naming the scope the token lacks (RFC 6750 §3.1), in REST's error body."""
    error = ErrorBody(
        code=ErrorCode.FORBIDDEN,
        message="this token was granted read access only: "
        "approve the client again with write access",
        detail={"error": "insufficient_scope", "scope": "pgrag:write"},
    )
    header = oauth.challenge("insufficient_scope", "pgrag:write")
    await send_rest_error(send, 403, RestErrorBody.of(error), ((b"www-authenticate", header),))


async def _unauthorized_jsonrpc(send: Send, *, sent_key: bool, challenge: bytes) -> None:
    """MCP clients read a JSON-RPC error body on any status: with it they can say that the
    key is missing or wrong instead of "Server returned an error response"."""
    await send_error(
        send,
        401,
        -32000,  # implementation-defined server error: JSON-RPC has no code for auth
        UNAUTHORIZED,
        data={"code": "UNAUTHORIZED", "reason": "unknown key" if sent_key else "no key"},
        headers=[(b"www-authenticate", challenge)],
    )
