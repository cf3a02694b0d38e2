"""OAuth on the HTTP app: the SDK's authorization server routes (metadata, /authorize,
/token, /register, /revoke) over PostgresProvider, the protected resource metadata
(RFC 9728) and what the bearer middleware asks: is a path open, whose is a token, and the
`WWW-Authenticate` challenge that tells a client where to start."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mcp.server.auth.handlers.metadata import MetadataHandler
from mcp.server.auth.routes import (
    build_metadata,
    build_resource_metadata_url,
    cors_middleware,
    create_auth_routes,
    create_protected_resource_routes,
)
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from psycopg_pool import AsyncConnectionPool
from pydantic import AnyHttpUrl, ConfigDict, TypeAdapter
from starlette.routing import Route

from pgrag.errors import ErrorCode, PgragError
from pgrag.http.oauth.provider import PostgresProvider, same_resource
from pgrag.services.context import SharedContext
from pgrag.services.oauth import SCOPES, OAuthScope
from pgrag.settings import Settings

CONSENT_PATH = "/console/oauth/consent"
AS_METADATA_PATH = "/.well-known/oauth-authorization-server"
OPEN_PATHS = ("/authorize", "/token", "/register", "/revoke")
WELL_KNOWN = "/.well-known/"


# as the SDK's metadata models read URLs: an origin stays without a trailing slash, so the
# issuer, the resource and the `iss` of a redirect compare equal as strings (RFC 8414/9207)
URL = TypeAdapter(AnyHttpUrl, config=ConfigDict(url_preserve_empty_path=True))


@dataclass(frozen=True)
class Principal:
    """Whom an OAuth access token speaks for."""

    caller: str
    collections: list[str] | None
    scopes: list[str]

    @property
    def may_write(self) -> bool:
        return OAuthScope.WRITE.value in self.scopes


def public_url(settings: Settings, host: str, port: int) -> str:
    """PGRAG_PUBLIC_URL, else the bound address (a wildcard bind answers as localhost)."""
    if settings.public_url:
        return settings.public_url
    name = "localhost" if host in ("0.0.0.0", "::", "") else host
    name = f"[{name}]" if ":" in name else name
    return f"http://{name}:{port}"


class OAuthGate:
    """The routes to mount and the checks BearerAuth makes for OAuth."""

    def __init__(self, settings: Settings, base: str, pool: Callable[[], AsyncConnectionPool]):
        self.issuer = base
        self.resource = base
        self.metadata_url = str(build_resource_metadata_url(URL.validate_python(base)))
        self.provider = PostgresProvider(
            pool,
            resource=self.resource,
            consent_url=base + CONSENT_PATH,
            ttl_s=(settings.oauth_access_ttl, settings.oauth_refresh_ttl),
            loopback_clients=settings.oauth_loopback_clients,
        )

    def routes(self) -> list[Route]:
        registration = ClientRegistrationOptions(
            enabled=True, valid_scopes=SCOPES, default_scopes=SCOPES
        )
        revocation = RevocationOptions(enabled=True)
        issuer = URL.validate_python(self.issuer)
        server_routes = create_auth_routes(
            self.provider,
            issuer,
            client_registration_options=registration,
            revocation_options=revocation,
        )
        # the SDK's metadata, plus what it cannot say: client ID metadata documents work
        metadata = build_metadata(issuer, None, registration, revocation)
        metadata.client_id_metadata_document_supported = True
        for route in server_routes:
            if route.path == AS_METADATA_PATH:
                route.app = cors_middleware(MetadataHandler(metadata).handle, ["GET", "OPTIONS"])
        return [
            *server_routes,
            *create_protected_resource_routes(
                URL.validate_python(self.resource),
                [URL.validate_python(self.issuer)],
                scopes_supported=SCOPES,
                resource_name="pgrag",
            ),
        ]

    @staticmethod
    def is_open(path: str) -> bool:
        return path in OPEN_PATHS or path.startswith(WELL_KNOWN)

    async def verify(self, token: str) -> Principal | None:
        """A live access token issued for this server's resource, or None."""
        access = await self.provider.load_access_token(token)
        if access is None or (access.expires_at or 0) < time.time():
            return None
        if not same_resource(access.resource, self.resource):
            return None
        return Principal("oauth:" + access.client_id[:12], access.collections, access.scopes)

    def challenge(self, error: str | None = None, scope: str | None = None) -> bytes:
        """`WWW-Authenticate` for a 401 (no or bad token) or a 403 (missing scope)."""
        parts = [f'resource_metadata="{self.metadata_url}"']
        if error:
            parts.insert(0, f'error="{error}"')
        parts.append(f'scope="{scope or " ".join(SCOPES)}"')
        return ("Bearer " + ", ".join(parts)).encode()


def oauth_gate(
    settings: Settings, keys: Sequence[object], host: str, port: int, shared: SharedContext
) -> OAuthGate | None:
    """OAuth when authentication is on (keys or an admin password) and not turned off."""
    if not settings.oauth or not (keys or settings.admin_password):
        return None

    def pool() -> AsyncConnectionPool:
        if shared.context is None:
            raise PgragError("the server is starting", code=ErrorCode.DB_ERROR)
        return shared.context.pool

    return OAuthGate(settings, public_url(settings, host, port), pool)
