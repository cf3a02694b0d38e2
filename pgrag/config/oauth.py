"""OAuth 2.1 for hosted MCP clients, and the console's owner password."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from pgrag.config.renamed import renamed_from


class OAuthSettings(BaseModel):
    """OAuth 2.1 for hosted MCP clients, and the console's owner password."""

    model_config = ConfigDict(populate_by_name=True)  # a renamed field: its name, or an alias

    oauth: bool = Field(
        True,
        description="OAuth 2.1 for hosted MCP clients beside the keys, whenever authentication "
        "is on (API keys or an admin password)",
    )
    public_url: str | None = Field(
        None,
        examples=["https://rag.example.com"],
        description="the URL clients reach this server at (`https://rag.example.com`, behind a "
        "TLS proxy); unset: the bound address. OAuth metadata and token audience use it",
    )
    admin_password: SecretStr | None = Field(
        None,
        description="console sign-in for the owner (full access), e.g. to approve OAuth clients",
    )
    oauth_loopback_clients: bool = Field(
        False,
        description="accept OAuth client ID metadata documents from loopback hosts, plain "
        "HTTP too (tests and local development; otherwise HTTPS from public hosts only)",
    )
    oauth_issuer: str | None = Field(
        None,
        description="trust this external authorization server's JWT access tokens instead of "
        "pgrag's own server (its `iss`, e.g. `https://id.example.com/realms/main`)",
    )
    oauth_jwks_url: str | None = Field(
        None, description="the external issuer's JWKS; unset: `<issuer>/.well-known/jwks.json`"
    )
    oauth_collections_claim: str = Field(
        "pgrag_collections",
        description="the external token's claim listing the collections it may read (`*`: all)",
    )
    oauth_access_ttl_s: int = Field(
        default=3600,
        ge=60,
        le=86400,
        validation_alias=renamed_from("oauth_access_ttl_s", "oauth_access_ttl"),
        description="seconds an OAuth access token lives",
    )
    oauth_refresh_ttl_s: int = Field(
        default=30 * 86400,
        ge=3600,
        le=365 * 86400,
        validation_alias=renamed_from("oauth_refresh_ttl_s", "oauth_refresh_ttl"),
        description="seconds an OAuth grant lives from its consent: refreshing never extends it",
    )
    oauth_registrations_per_hour: int = Field(
        30, ge=1, le=100_000, description="OAuth client registrations one address may make an hour"
    )
    oauth_max_unused_clients: int = Field(
        1000,
        ge=10,
        le=1_000_000,
        description="OAuth clients not yet approved that are kept (each is forgotten after a day)",
    )

    def oauth_on(self, *, has_keys: bool) -> bool:
        """OAuth whenever authentication is on (keys or an admin password), unless off."""
        return self.oauth and (has_keys or self.admin_password is not None)

    @field_validator("public_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        """An origin (the metadata paths are fixed at the root), kept without a slash."""
        if value is None:
            return None
        if not re.fullmatch(r"https?://[^/?#\s]+/?", value):
            raise ValueError("must be an origin such as https://rag.example.com (no path)")
        return value.rstrip("/")
