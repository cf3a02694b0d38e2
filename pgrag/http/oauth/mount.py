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
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, RequestBodyLimitMiddleware
from psycopg_pool import AsyncConnectionPool
from starlette.routing import Route

from pgrag.config.oauth import OAuthSettings
from pgrag.errors import ErrorCode, PgragError
from pgrag.http.auth import ApiKey, admin_keys
from pgrag.http.oauth.client_documents import DocumentFetcher
from pgrag.http.oauth.endpoints import AuthorizePage, Budget, PublicRevocation, RegistrationGuard
from pgrag.http.oauth.external import ExternalIssuer
from pgrag.http.oauth.gate import URL, OAuthGate, Principal
from pgrag.http.oauth.provider import PostgresProvider, same_resource
from pgrag.services.context import SharedContext
from pgrag.services.oauth import SCOPES
from pgrag.services.oauth_tokens import Approvers, GrantStore

CONSENT_PATH = "/console/oauth/consent"
AS_METADATA_PATH = "/.well-known/oauth-authorization-server"
OPEN_PATHS = ("/authorize", "/token", "/register", "/revoke")
AUTH_METHODS = ["client_secret_post", "client_secret_basic", "none"]
WELL_KNOWN = "/.well-known/"


def public_url(settings: OAuthSettings, host: str, port: int) -> str:
    """PGRAG_PUBLIC_URL, else the bound address (a wildcard bind answers as localhost)."""
    if settings.public_url:
        return settings.public_url
    name = "localhost" if host in ("0.0.0.0", "::", "") else host
    name = f"[{name}]" if ":" in name else name
    return f"http://{name}:{port}"


class OwnServer(OAuthGate):
    """pgrag as its own authorization server: the SDK's routes over PostgresProvider."""

    own_server = True

    def __init__(
        self,
        settings: OAuthSettings,
        base: str,
        pool: Callable[[], AsyncConnectionPool],
        keys: Sequence[ApiKey],
    ):
        super().__init__(base, base)
        # a grant speaks for its approver only while the approver's key or password is set
        approver_keys = [*keys, *admin_keys(settings)]
        approvers = Approvers(lambda: {k.caller: k.collections for k in approver_keys})
        grants = GrantStore(
            pool,
            approvers,
            ttl_s=(settings.oauth_access_ttl_s, settings.oauth_refresh_ttl_s),
            max_unused_clients=settings.oauth_max_unused_clients,
        )
        self.provider = PostgresProvider(
            grants,
            DocumentFetcher(loopback_allowed=settings.oauth_loopback_clients),
            resource=self.resource,
            consent_url=base + CONSENT_PATH,
        )
        self.registrations = Budget(settings.oauth_registrations_per_hour)

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
        # the SDK's metadata, plus what it cannot say: client ID metadata documents work,
        # and public clients (auth method none) register, get tokens and revoke them
        metadata = build_metadata(issuer, None, registration, revocation)
        metadata.client_id_metadata_document_supported = True
        metadata.token_endpoint_auth_methods_supported = AUTH_METHODS
        metadata.revocation_endpoint_auth_methods_supported = AUTH_METHODS
        revoke = PublicRevocation(self.provider).handle
        wrap: dict[str, Callable[[Route], object]] = {
            AS_METADATA_PATH: lambda _: cors_middleware(
                MetadataHandler(metadata).handle, ["GET", "OPTIONS"]
            ),
            "/register": lambda route: RegistrationGuard(route.app, self.registrations),
            "/authorize": lambda route: AuthorizePage(route.app),
            "/revoke": lambda _: RequestBodyLimitMiddleware(
                cors_middleware(revoke, ["POST", "OPTIONS"]), DEFAULT_MAX_REQUEST_BODY_SIZE
            ),
        }
        for route in server_routes:
            if route.path in wrap:
                route.app = wrap[route.path](route)  # type: ignore[assignment]
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
    settings: OAuthSettings, keys: Sequence[ApiKey], host: str, port: int, shared: SharedContext
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

    return OwnServer(settings, base, pool, keys)
