"""What BearerAuth asks of OAuth, whoever issues the tokens: the paths left open, whom a
token speaks for, the `WWW-Authenticate` challenge, and the protected resource metadata
(RFC 9728) that names the authorization server."""

from __future__ import annotations

from dataclasses import dataclass

from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from pydantic import AnyHttpUrl, ConfigDict, TypeAdapter
from starlette.routing import Route

from pgrag.services.oauth import SCOPES, OAuthScope

WELL_KNOWN = "/.well-known/"
MCP_PATH = "/mcp"

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


class OAuthGate:
    """What BearerAuth asks of OAuth, and the protected resource metadata (RFC 9728)
    naming the authorization server that issues this server's tokens."""

    own_server = False  # pgrag's own authorization server and consent page

    def __init__(self, resource: str, issuer: str) -> None:
        self.resource = resource
        self.issuer = issuer
        self.metadata_url = str(build_resource_metadata_url(URL.validate_python(resource)))

    def routes(self) -> list[Route]:
        """The metadata of the server's URL, and of its MCP endpoint's in RFC 9728's path
        form (`/.well-known/oauth-protected-resource/mcp`), where MCP clients look first."""
        return [
            route
            for resource in (self.resource, self.resource.rstrip("/") + MCP_PATH)
            for route in create_protected_resource_routes(
                URL.validate_python(resource),
                [URL.validate_python(self.issuer)],
                scopes_supported=SCOPES,
                resource_name="pgrag",
            )
        ]

    def is_open(self, path: str) -> bool:
        return path.startswith(WELL_KNOWN)

    async def verify(self, token: str) -> Principal | None:
        """Whom a live token issued for this server's resource speaks for, or None."""
        raise NotImplementedError

    def challenge(self, error: str | None = None, scope: str | None = None) -> bytes:
        """`WWW-Authenticate` for a 401 (no or bad token) or a 403 (missing scope)."""
        parts = [f'resource_metadata="{self.metadata_url}"']
        if error:
            parts.insert(0, f'error="{error}"')
        parts.append(f'scope="{scope or " ".join(SCOPES)}"')
        return ("Bearer " + ", ".join(parts)).encode()
