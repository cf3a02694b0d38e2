"""The token side of pgrag's authorization server, for the SDK provider in
pgrag/http/oauth/provider.py: clients, codes and tokens under a grant, each step over a
pooled connection of its own.

A grant lives only while the key or password that approved it is configured (`Approvers`:
remove the key, or change the admin password, and its grants stop at the next request), it
reads no more than that approver reads today, and it ends `lifetime_s` after the consent
whatever is refreshed: a refresh token never outlives its grant. Clients nobody was ever
granted anything for are capped in number and forgotten after a day."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from psycopg import AsyncConnection
from psycopg_pool import AsyncConnectionPool

from pgrag.errors import ErrorCode, PgragError
from pgrag.services.oauth import digest, new_secret
from pgrag.store import oauth as store
from pgrag.store.oauth import Grant, StoredCode, StoredToken

__all__ = ["Approvers", "Grant", "GrantStore", "StoredCode", "StoredToken", "TooManyClients"]

S = TypeVar("S", StoredCode, StoredToken)
UNUSED_CLIENT_TTL_S = 24 * 3600  # a registration nobody approved within a day is forgotten


class TooManyClients(PgragError):
    code = ErrorCode.RATE_LIMITED


class Approvers:
    """Who can have approved a live grant: the audit names of the configured keys and of the
    admin password, each with the collections it may read now (None: every collection).
    Named on first use: caller names are keyed by the database's secret, which the server
    reads once it has started (services/caller_names.py)."""

    def __init__(self, named: Callable[[], Mapping[str, list[str] | None]]) -> None:
        self._named = named
        self._scopes: Mapping[str, list[str] | None] | None = None

    @property
    def scopes(self) -> Mapping[str, list[str] | None]:
        if self._scopes is None:
            self._scopes = self._named()
        return self._scopes

    def admit(self, grant: Grant, lifetime_s: int) -> Grant | None:
        """The grant as it stands today: None when revoked, past its lifetime, or its
        approver is gone; else limited to what the approver may still read."""
        scopes = self.scopes
        if grant.revoked or grant.owner not in scopes:
            return None
        if grant.created_at + lifetime_s <= time.time():
            return None
        reach = scopes[grant.owner]
        if reach is None:
            return grant
        held = reach if grant.collections is None else grant.collections
        return replace(grant, collections=[c for c in held if c in reach])


class GrantStore:
    """Clients, codes and tokens in PostgreSQL, as the provider asks for them."""

    def __init__(
        self,
        pool: Callable[[], AsyncConnectionPool],
        approvers: Approvers,
        *,
        ttl_s: tuple[int, int],
        max_unused_clients: int,
    ) -> None:
        self._pool = pool
        self.approvers = approvers
        self.access_ttl_s, self.lifetime_s = ttl_s
        self.max_unused_clients = max_unused_clients

    def pool(self) -> AsyncConnectionPool:
        return self._pool()

    async def client(self, client_id: str) -> dict[str, Any] | None:
        async with self._pool().connection() as conn:
            return await store.load_client(conn, client_id)

    async def save_client(self, client_id: str, info: dict[str, Any]) -> None:
        """Store a client; TooManyClients when it is new and the cap of clients never
        granted anything is reached (they expire after UNUSED_CLIENT_TTL_S)."""
        async with self._pool().connection() as conn:
            await store.prune_clients(conn, UNUSED_CLIENT_TTL_S)
            saved = await store.save_client(
                conn, client_id, info, unused_cap=self.max_unused_clients
            )
        if not saved:
            raise TooManyClients(
                f"{self.max_unused_clients} clients await their first approval: "
                "try again later (unapproved clients are forgotten after a day)"
            )

    async def code(self, code: str) -> StoredCode | None:
        return await self._live(lambda conn: store.load_code(conn, digest(code)))

    async def refresh_token(self, token: str) -> StoredToken | None:
        return await self._live(lambda conn: store.load_token(conn, digest(token), "refresh"))

    async def access_token(self, token: str) -> StoredToken | None:
        async with self._pool().connection() as conn:
            found = await store.load_token(conn, digest(token), "access")
        return self._admitted(found)

    async def use_code(self, code: str, grant_id: int) -> bool:
        """Mark a code used; a second use is a replay, and ends its grant (False)."""
        return await self._once(store.use_code, code, grant_id)

    async def rotate(self, token: str, grant_id: int) -> bool:
        """Mark a refresh token used; a second use is a replay, and ends its grant (False)."""
        return await self._once(store.rotate, token, grant_id)

    async def issue(self, grant_id: int) -> tuple[str, str, int]:
        """A new access and refresh token of the grant, and the access token's lifetime
        (seconds): neither lives past the grant's end."""
        access, refresh = new_secret(), new_secret()
        async with self._pool().connection() as conn:
            ttl = (self.access_ttl_s, self.lifetime_s)
            ends = await store.save_token(conn, digest(access), grant_id, "access", ttl)
            ttl = (self.lifetime_s, self.lifetime_s)
            await store.save_token(conn, digest(refresh), grant_id, "refresh", ttl)
        return access, refresh, max(0, ends - int(time.time()))

    async def revoke(self, grant_id: int) -> None:
        async with self._pool().connection() as conn:
            await store.revoke_grant(conn, grant_id)

    async def _once(
        self, mark: Callable[[AsyncConnection, str], Awaitable[bool]], secret: str, grant_id: int
    ) -> bool:
        async with self._pool().connection() as conn:
            if await mark(conn, digest(secret)):
                return True
            await store.revoke_grant(conn, grant_id)
        return False

    async def _live(self, lookup: Callable[[AsyncConnection], Awaitable[S | None]]) -> S | None:
        """What `lookup` finds, unless its grant has ended or it was used before: a code
        presented twice, or a refresh token after rotation, is a replay that ends the grant
        (the legitimate client and a thief cannot be told apart)."""
        async with self._pool().connection() as conn:
            found = await lookup(conn)
            if found is not None and found.used:
                await store.revoke_grant(conn, found.grant.id)
        return None if found is None or found.used else self._admitted(found)

    def _admitted(self, found: S | None) -> S | None:
        grant = self.approvers.admit(found.grant, self.lifetime_s) if found else None
        return replace(found, grant=grant) if found is not None and grant is not None else None
