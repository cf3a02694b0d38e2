"""The connected OAuth clients as the console lists them: enough to tell two clients of
the same name apart (their id, where they send the browser back to, when they last
fetched a token) and each grant's real state, so an abandoned grant never reads as
connected."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from urllib.parse import urlsplit

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel

from pgrag.services.oauth import shown_name
from pgrag.store import oauth as store

SHORT_ID = 12  # characters of a client id the table shows (the full one on hover and copy)


class GrantState(StrEnum):
    CONNECTED = "connected"  # an access token issued under it is still valid
    IDLE = "idle"  # no valid access token, but its refresh token can still get one
    EXPIRED = "expired"  # neither: the client must be approved again
    UNUSED = "unused"  # approved, but no token was ever issued under it


class ClientRow(BaseModel):
    """One grant on the connected clients page."""

    grant_id: int
    client_id: str
    short_id: str
    name: str | None
    redirect_uris: list[str]
    redirect_hosts: list[str]
    scopes: list[str]
    collections: list[str] | None  # None: every collection
    owner: str
    created_at: datetime
    last_used: datetime | None
    state: GrantState
    since: datetime | None  # idle: the last use; expired: when its last token expired


def short_id(client_id: str) -> str:
    """A client id short enough for a table cell: a metadata document's URL without its
    scheme, cut at SHORT_ID characters."""
    bare = client_id.removeprefix("https://")
    return bare if len(bare) <= SHORT_ID else bare[: SHORT_ID - 1] + "…"


def redirect_host(uri: str) -> str:
    """Where a redirect URI leads: its host (and port), or an app's own scheme."""
    parts = urlsplit(uri)
    return parts.netloc or f"{parts.scheme}:"


def grant_state(found: store.ConnectedClient, now: datetime) -> tuple[GrantState, datetime | None]:
    """The grant's state and since when, from its newest tokens' expiries."""
    if found.last_used is None:
        return GrantState.UNUSED, None
    if found.access_until is not None and found.access_until > now:
        return GrantState.CONNECTED, None
    if found.refresh_until is not None and found.refresh_until > now:
        return GrantState.IDLE, found.last_used
    ends = [t for t in (found.access_until, found.refresh_until) if t is not None]
    return GrantState.EXPIRED, max(ends) if ends else found.last_used


def client_row(found: store.ConnectedClient, now: datetime) -> ClientRow:
    state, since = grant_state(found, now)
    grant = found.grant
    return ClientRow(
        grant_id=grant.id,
        client_id=grant.client_id,
        short_id=short_id(grant.client_id),
        name=shown_name(found.client_name) if found.client_name else None,
        redirect_uris=found.redirect_uris,
        redirect_hosts=sorted({redirect_host(u) for u in found.redirect_uris}),
        scopes=grant.scopes,
        collections=grant.collections,
        owner=grant.owner,
        created_at=found.created_at,
        last_used=found.last_used,
        state=state,
        since=since,
    )


async def connected(pool: AsyncConnectionPool) -> list[ClientRow]:
    """Every grant not revoked, newest first, with its state now."""
    async with pool.connection() as conn:
        found = await store.connected_clients(conn)
    now = datetime.now(UTC)
    return [client_row(c, now) for c in found]
