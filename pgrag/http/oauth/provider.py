"""The SDK's `OAuthAuthorizationServerProvider` over PostgreSQL (pgrag.store.oauth).

Every code and token belongs to a grant (one consent). A code is used once: presenting it
again revokes its grant. Refresh tokens rotate: presenting a rotated one again (a stolen
copy, or the legitimate client after theft) revokes the grant, every token of it included.
Access tokens are short-lived and bound to this server's resource URL."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    OAuthAuthorizationServerProvider,
    RefreshToken,
    TokenError,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool
from pydantic import AnyUrl

from pgrag.http.oauth.client_documents import client_from_document, is_document_id
from pgrag.services import oauth as decisions
from pgrag.services.oauth import SCOPES, digest, new_secret
from pgrag.store import oauth as store
from pgrag.store.oauth import Grant, StoredCode, StoredToken

S = TypeVar("S", StoredCode, StoredToken)


class GrantedCode(AuthorizationCode):
    grant_id: int


class GrantedRefresh(RefreshToken):
    grant_id: int


class GrantedAccess(AccessToken):
    grant_id: int
    collections: list[str] | None  # None: every collection


def same_resource(a: str | None, b: str) -> bool:
    return a is not None and a.rstrip("/") == b.rstrip("/")


class PostgresProvider(
    OAuthAuthorizationServerProvider[GrantedCode, GrantedRefresh, GrantedAccess]
):
    """Clients, codes and tokens in PostgreSQL; the consent page decides (consent_url)."""

    def __init__(
        self,
        pool: Callable[[], AsyncConnectionPool],
        *,
        resource: str,
        consent_url: str,
        ttl_s: tuple[int, int],
        loopback_clients: bool = False,
    ) -> None:
        self._pool = pool
        self.resource = resource
        self.consent_url = consent_url
        self.access_ttl_s, self.refresh_ttl_s = ttl_s
        self.loopback_clients = loopback_clients

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        """A registered client, or one a client ID metadata document describes (fetched
        each time, so a changed document counts; kept too, for the grants that name it)."""
        if is_document_id(client_id):
            client = await client_from_document(client_id, loopback_allowed=self.loopback_clients)
            if client is not None:
                client.scope = client.scope or " ".join(SCOPES)
                await self.register_client(client)
            return client
        async with self._pool().connection() as conn:
            info = await store.load_client(conn, client_id)
        return OAuthClientInformationFull.model_validate(info) if info else None

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        info = client_info.model_dump(mode="json", exclude_none=True)
        async with self._pool().connection() as conn:
            await store.save_client(conn, str(client_info.client_id), info)

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
        request_id = await decisions.save_pending(self._pool(), str(client.client_id), saved)
        return decisions.with_query(self.consent_url, request=request_id)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> GrantedCode | None:
        found = await self._live(lambda conn: store.load_code(conn, digest(authorization_code)))
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
        async with self._pool().connection() as conn:
            if not await store.use_code(conn, digest(authorization_code.code)):
                await store.revoke_grant(conn, authorization_code.grant_id)
                raise TokenError("invalid_grant", "authorization code already used")
        return await self._issue(authorization_code.grant_id, authorization_code.scopes)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> GrantedRefresh | None:
        found = await self._live(
            lambda conn: store.load_token(conn, digest(refresh_token), "refresh")
        )
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
        async with self._pool().connection() as conn:
            if not await store.rotate(conn, digest(refresh_token.token)):
                await store.revoke_grant(conn, refresh_token.grant_id)
                raise TokenError("invalid_grant", "refresh token already used")
        # a token carries its grant's scopes: the response says so when fewer were asked
        return await self._issue(refresh_token.grant_id, refresh_token.scopes)

    async def _live(self, lookup: Callable[[AsyncConnection], Awaitable[S | None]]) -> S | None:
        """What `lookup` finds, unless its grant is revoked or it was used before: a code
        presented twice, or a refresh token after rotation, is a replay that ends the grant
        (the legitimate client and a thief cannot be told apart)."""
        async with self._pool().connection() as conn:
            found = await lookup(conn)
            if found is not None and found.used:
                await store.revoke_grant(conn, found.grant.id)
        if found is None or found.used or found.grant.revoked:
            return None
        return found

    async def _issue(self, grant_id: int, scopes: list[str]) -> OAuthToken:
        access, refresh = new_secret(), new_secret()
        async with self._pool().connection() as conn:
            await store.save_token(conn, digest(access), grant_id, "access", self.access_ttl_s)
            await store.save_token(conn, digest(refresh), grant_id, "refresh", self.refresh_ttl_s)
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=self.access_ttl_s,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def load_access_token(self, token: str) -> GrantedAccess | None:
        async with self._pool().connection() as conn:
            found = await store.load_token(conn, digest(token), "access")
        if found is None or found.grant.revoked:
            return None
        return _access(token, found.grant, found.expires_at)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        """Either token ends its whole grant (RFC 7009 lets the server revoke related tokens)."""
        grant_id = getattr(token, "grant_id", None)
        if grant_id is not None:
            await decisions.revoke(self._pool(), int(grant_id))


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
