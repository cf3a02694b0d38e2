"""DNS-rebinding guard for every HTTP route but /healthz.

A web page can make a browser send requests to 127.0.0.1 under its own host name (DNS
rebinding) or from its own origin (cross-site requests). Both carry a give-away header:
the `Host` of a rebound name, or an `Origin` that is not ours. One policy, applied in front
of everything (REST, /mcp, /sse, /metrics), refuses them: 421 for a foreign `Host`, 403 for a
foreign `Origin` (or a malformed one), 400 for a repeated `Host`, `Origin` or
`Authorization` (which copy wins differs between proxies and servers). The MCP SDK's own
check, which covered /mcp and /sse only, is switched off so that one rule with one error
body holds everywhere.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from pgrag.errors import ErrorBody, ErrorCode
from pgrag.http.errors import RestErrorBody, send_rest_error

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz"})
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
SINGLE_HEADERS = (b"host", b"origin", b"authorization")
# RFC 9110 authority without userinfo: a name or IPv4 address, or [IPv6], then an optional port
_HOST = r"(?:[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?|\[[0-9a-f:.]+\])(?::[0-9]{1,5})?"
VALID_HOST = re.compile(_HOST)
VALID_ORIGIN = re.compile(rf"(?:https?://{_HOST}|null)")


@dataclass(frozen=True)
class HostPolicy:
    """Which `Host` and `Origin` headers the server answers.

    Patterns: `name` (exactly, port included if given), `name:*` (any port), `*` (any).
    An `Origin` is accepted when absent (not a browser, or same-origin GET), when it is the
    server's own (its host:port equals the request's `Host`), or when it matches `origins`.
    """

    hosts: tuple[str, ...]
    origins: tuple[str, ...]

    def host_allowed(self, host: str) -> bool:
        host = host.lower()
        return bool(VALID_HOST.fullmatch(host)) and any(_matches(host, p) for p in self.hosts)

    def origin_allowed(self, origin: str, host: str) -> bool:
        if not origin:
            return True
        origin = origin.lower().rstrip("/")
        if not VALID_ORIGIN.fullmatch(origin):
            return False
        if urlsplit(origin).netloc == host.lower():
            return True
        return any(_matches(origin, p) for p in self.origins)


def _matches(value: str, pattern: str) -> bool:
    if pattern == "*":
        return True
    if pattern.endswith(":*"):  # the name with any port, or none; never a longer name
        base = pattern[:-2]
        port = value.removeprefix(base + ":") if value.startswith(base + ":") else None
        return value == base or (port is not None and re.fullmatch("[0-9]{1,5}", port) is not None)
    return value == pattern


def _split(spec: str | None) -> tuple[str, ...]:
    return tuple(p.strip().lower().rstrip("/") for p in (spec or "").split(",") if p.strip())


def is_loopback(bind_host: str) -> bool:
    if bind_host.strip("[]") == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind_host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_policy(
    bind_host: str, allowed_hosts: str | None, allowed_origins: str | None
) -> HostPolicy:
    """The policy for a server bound to `bind_host`.

    Unset `allowed_hosts` means: loopback names only when bound to a loopback address (the
    case DNS rebinding attacks), any host otherwise (the server is reached under names it
    cannot know; set PGRAG_ALLOWED_HOSTS to pin them). Loopback origins are accepted on a
    loopback server, as the MCP SDK does (local tools such as the Inspector's web UI).
    """
    loopback = is_loopback(bind_host)
    hosts = _split(allowed_hosts) or (
        tuple(f"{h}:*" for h in LOOPBACK_HOSTS) if loopback else ("*",)
    )
    origins = _split(allowed_origins)
    if loopback and not allowed_origins:
        origins = tuple(f"http://{h}:*" for h in LOOPBACK_HOSTS)
    return HostPolicy(hosts=hosts, origins=origins)


class HostGuard:
    """ASGI middleware enforcing a HostPolicy (outermost: before authentication)."""

    def __init__(self, app: ASGIApp, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        raw = list(scope.get("headers") or [])
        names = [n.lower() for n, _ in raw]  # ASGI servers lower-case them; be sure
        repeated = [n.decode() for n in SINGLE_HEADERS if names.count(n) > 1]
        if repeated:
            await _refuse(
                send,
                400,
                ErrorCode.INVALID_ARGUMENT,
                f"repeated {', '.join(repeated)} header: send each once",
                {"headers": ", ".join(repeated)},
            )
            return
        headers = dict(raw)
        host = headers.get(b"host", b"").decode("latin-1")
        origin = headers.get(b"origin", b"").decode("latin-1")
        if not self.policy.host_allowed(host):
            log.warning("refused a request for Host %r (not in PGRAG_ALLOWED_HOSTS)", host)
            await _refuse(
                send,
                421,
                ErrorCode.INVALID_HOST,
                f"this server does not answer for Host {host!r}: add it to PGRAG_ALLOWED_HOSTS",
                {"host": host},
            )
            return
        if not self.policy.origin_allowed(origin, host):
            log.warning("refused a request from Origin %r (not in PGRAG_ALLOWED_ORIGINS)", origin)
            await _refuse(
                send,
                403,
                ErrorCode.FORBIDDEN,
                f"requests from Origin {origin!r} are not allowed: add it to PGRAG_ALLOWED_ORIGINS",
                {"origin": origin},
            )
            return
        await self.app(scope, receive, send)


async def _refuse(
    send: Send, status: int, code: ErrorCode, message: str, detail: dict[str, str]
) -> None:
    error = ErrorBody(code=code, message=message, detail=detail)
    await send_rest_error(send, status, RestErrorBody.of(error))
