"""The SDK's `OAuthAuthorizationServerProvider` over pgrag's grant store
(pgrag/services/oauth_tokens.py), which owns the connections and the rules.

Every code and token belongs to a grant (one consent). A code is used once: presenting it
again revokes its grant. Refresh tokens rotate: presenting a rotated one again (a stolen
copy, or the legitimate client after theft) revokes the grant, every token of it included.
A grant ends when its approver's key or password is gone, and at its absolute lifetime.
Access tokens are short-lived and bound to this server's resource URL."""

from __future__ import annotations

from typing import Any

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    RegistrationError,
    TokenError,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl, ValidationError

from pgrag.errors import InvalidArgument, PgragError
from pgrag.http.oauth.client_documents import DocumentFetcher, is_document_id, refused
from pgrag.http.oauth.endpoints import ClientCapReached
from pgrag.http.oauth.gate import MCP_PATH
from pgrag.services import oauth as decisions
from pgrag.services.oauth import SCOPES
from pgrag.services.oauth_clients import check_metadata, safe_redirect_uris
from pgrag.services.oauth_tokens import Grant, GrantStore, TooManyClients


class GrantedCode(AuthorizationCode):
    grant_id: int


class GrantedRefresh(RefreshToken):
    grant_id: int


class GrantedAccess(AccessToken):
    grant_id: int
    collections: list[str] | None  # None: every collection


def same_resource(a: str | None, b: str) -> bool:
    """Is `a` this server (`b`): its URL, or its MCP endpoint's (RFC 8707 lets a client
    name either; MCP clients send the endpoint's)."""
    if a is None:
        return False
    base = b.rstrip("/")
    return a.rstrip("/") in (base, base + MCP_PATH)


class PostgresProvider(
    OAuthAuthorizationServerProvider[GrantedCode, GrantedRefresh, GrantedAccess]
):
    """Clients, codes and tokens in PostgreSQL; the consent page decides (consent_url)."""

    def __init__(
        self,
        grants: GrantStore,
        documents: DocumentFetcher,
        *,
        resource: str,
        consent_url: str,
    ) -> None:
        self.grants = grants
        self.documents = documents
        self.resource = resource
        self.consent_url = consent_url

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        """A registered client, or one a client ID metadata document describes (fetched
        each time, so a changed document counts; kept too, for the grants that name it)."""
        if is_document_id(client_id):
            client = await self.documents.client(client_id)
            if client is None:
                return None
            client.scope = client.scope or " ".join(SCOPES)
            try:
                await self.grants.save_client(client_id, _info(client))
            except TooManyClients as exc:
                refused(exc.message)
                return None
            return client
        info = await self.grants.client(client_id)
        if not info:
            return None
        # a client registered before the redirect rules keeps only the URIs that pass them
        info["redirect_uris"] = safe_redirect_uris(list(info.get("redirect_uris") or []))
        try:
            return OAuthClientInformationFull.model_validate(info)
        except ValidationError:  # none left
            return None

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        info = _info(client_info)
        try:
            check_metadata(info)
        except InvalidArgument as exc:
            if "redirect URI" in exc.message:
                raise RegistrationError("invalid_redirect_uri", exc.message) from None
            raise RegistrationError("invalid_client_metadata", exc.message) from None
        try:
            await self.grants.save_client(str(client_info.client_id), info)
        except TooManyClients as exc:
            raise ClientCapReached(exc.message) from None

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        """Park the request and send the browser to the consent page."""
        if params.resource is not None and not same_resource(params.resource, self.resource):
            raise AuthorizeError(
                "invalid_target", f"this server issues tokens for {self.resource} only"
            )
        saved = params.model_dump(mode="json")
        saved["resource"] = self.resource
        try:
            pool = self.grants.pool()
            request_id = await decisions.save_pending(pool, str(client.client_id), saved)
        except InvalidArgument as exc:  # too large
            raise AuthorizeError("invalid_request", exc.message) from None
        except PgragError as exc:  # too many waiting
            raise AuthorizeError("temporarily_unavailable", exc.message) from None
        return decisions.with_query(self.consent_url, request=request_id)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> GrantedCode | None:
        found = await self.grants.code(authorization_code)
        if found is None:
            return None
        return GrantedCode(
            code=authorization_code,
            scopes=found.grant.scopes,
            expires_at=found.expires_at,
            client_id=found.grant.client_id,
            code_challenge=found.code_challenge,
            redirect_uri=AnyUrl(found.redirect_uri),
            redirect_uri_provided_explicitly=found.redirect_explicit,
            resource=found.grant.resource,
            subject=found.grant.owner,
            grant_id=found.grant.id,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: GrantedCode
    ) -> OAuthToken:
        if not await self.grants.use_code(authorization_code.code, authorization_code.grant_id):
            raise TokenError("invalid_grant", "authorization code already used")
        return await self._issue(authorization_code.grant_id, authorization_code.scopes)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> GrantedRefresh | None:
        found = await self.grants.refresh_token(refresh_token)
        if found is None:
            return None
        return GrantedRefresh(
            token=refresh_token,
            client_id=found.grant.client_id,
            scopes=found.grant.scopes,
            expires_at=found.expires_at,
            resource=found.grant.resource,
            subject=found.grant.owner,
            grant_id=found.grant.id,
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: GrantedRefresh, scopes: list[str]
    ) -> OAuthToken:
        if not await self.grants.rotate(refresh_token.token, refresh_token.grant_id):
            raise TokenError("invalid_grant", "refresh token already used")
        # a token carries its grant's scopes: the response says so when fewer were asked
        return await self._issue(refresh_token.grant_id, refresh_token.scopes)

    async def _issue(self, grant_id: int, scopes: list[str]) -> OAuthToken:
        access, refresh, expires_in = await self.grants.issue(grant_id)
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=expires_in,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def load_access_token(self, token: str) -> GrantedAccess | None:
        found = await self.grants.access_token(token)
        return _access(token, found.grant, found.expires_at) if found else None

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        """Either token ends its whole grant (RFC 7009 lets the server revoke related tokens)."""
        grant_id = getattr(token, "grant_id", None)
        if grant_id is not None:
            await self.grants.revoke(int(grant_id))


def _info(client: OAuthClientInformationFull) -> dict[str, Any]:
    return client.model_dump(mode="json", exclude_none=True)


def _access(token: str, grant: Grant, expires_at: int) -> GrantedAccess:
    return GrantedAccess(
        token=token,
        client_id=grant.client_id,
        scopes=grant.scopes,
        expires_at=expires_at,
        resource=grant.resource,
        subject=grant.owner,
        grant_id=grant.id,
        collections=grant.collections,
    )
