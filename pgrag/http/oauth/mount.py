"""OAuth on the HTTP app: the SDK's authorization server routes (metadata, /authorize,
/token, /register, /revoke) over PostgresProvider, the protected resource metadata
(RFC 9728) and what the bearer middleware asks: is a path open, whose is a token, and the
`WWW-Authenticate` challenge that tells a client where to start."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from mcp.server.auth.handlers.metadata import MetadataHandler
from mcp.server.auth.routes import (
    build_metadata,
    cors_middleware,
    create_auth_routes,
)
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from psycopg_pool import AsyncConnectionPool
from starlette.routing import Route

from pgrag.errors import ErrorCode, PgragError
from pgrag.http.oauth.external import ExternalIssuer
from pgrag.http.oauth.gate import URL, OAuthGate, Principal
from pgrag.http.oauth.provider import PostgresProvider, same_resource
from pgrag.services.context import SharedContext
from pgrag.services.oauth import SCOPES
from pgrag.settings import Settings

CONSENT_PATH = "/console/oauth/consent"
AS_METADATA_PATH = "/.well-known/oauth-authorization-server"
OPEN_PATHS = ("/authorize", "/token", "/register", "/revoke")
WELL_KNOWN = "/.well-known/"


def public_url(settings: Settings, host: str, port: int) -> str:
    """PGRAG_PUBLIC_URL, else the bound address (a wildcard bind answers as localhost)."""
    if settings.public_url:
        return settings.public_url
    name = "localhost" if host in ("0.0.0.0", "::", "") else host
    name = f"[{name}]" if ":" in name else name
    return f"http://{name}:{port}"


class OwnServer(OAuthGate):
    """pgrag as its own authorization server: the SDK's routes over PostgresProvider."""

    own_server = True

    def __init__(self, settings: Settings, base: str, pool: Callable[[], AsyncConnectionPool]):
        super().__init__(base, base)
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
        return [*server_routes, *super().routes()]

    def is_open(self, path: str) -> bool:
        return path in OPEN_PATHS or super().is_open(path)

    async def verify(self, token: str) -> Principal | None:
        access = await self.provider.load_access_token(token)
        if access is None or (access.expires_at or 0) < time.time():
            return None
        if not same_resource(access.resource, self.resource):
            return None
        # named by its grant: two clients (or two consents) are two callers, never one
        return Principal(f"oauth:grant-{access.grant_id}", access.collections, access.scopes)


def oauth_gate(
    settings: Settings, keys: Sequence[object], host: str, port: int, shared: SharedContext
) -> OAuthGate | None:
    """OAuth when authentication is on (keys or an admin password) and not turned off:
    tokens of an external issuer (PGRAG_OAUTH_ISSUER) or of pgrag's own server."""
    if not settings.oauth_on(has_keys=bool(keys)):
        return None
    base = public_url(settings, host, port)
    if settings.oauth_issuer:
        return ExternalIssuer(settings, base)

    def pool() -> AsyncConnectionPool:
        if shared.context is None:
            raise PgragError("the server is starting", code=ErrorCode.DB_ERROR)
        return shared.context.pool

    return OwnServer(settings, base, pool)
