"""OAuth state in PostgreSQL (migration 0025): clients, pending authorization requests,
grants and the codes and tokens issued under them. Secrets arrive here already hashed
(pgrag.services.oauth_tokens); a grant is the family every code and token of one consent
belongs to, so revoking it ends them all."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from pgrag.db.one import one_row

UNUSED_CLIENT = "NOT EXISTS (SELECT 1 FROM pgrag.oauth_grants g WHERE g.client_id = c.client_id)"
UPDATE_CLIENT_SQL = "UPDATE pgrag.oauth_clients SET info = %s WHERE client_id = %s RETURNING 1"
# a new client only while fewer than the cap were never granted anything
ADD_CLIENT_SQL = (
    "INSERT INTO pgrag.oauth_clients (client_id, info) SELECT %s, %s"
    f" WHERE (SELECT count(*) FROM pgrag.oauth_clients c WHERE {UNUSED_CLIENT}) < %s"
    " ON CONFLICT (client_id) DO UPDATE SET info = excluded.info RETURNING 1"
)
PRUNE_CLIENTS_SQL = (
    "DELETE FROM pgrag.oauth_clients c"
    f" WHERE created_at < now() - make_interval(secs => %s) AND {UNUSED_CLIENT}"
)
LOAD_CLIENT_SQL = "SELECT info FROM pgrag.oauth_clients WHERE client_id = %s"
SAVE_REQUEST_SQL = (  # only while fewer than the cap are pending
    "INSERT INTO pgrag.oauth_requests (id_hash, client_id, params, expires_at)"
    " SELECT %s, %s, %s, now() + make_interval(secs => %s)"
    " WHERE (SELECT count(*) FROM pgrag.oauth_requests) < %s RETURNING 1"
)
LOAD_REQUEST_SQL = (
    "SELECT client_id, params FROM pgrag.oauth_requests WHERE id_hash = %s AND expires_at > now()"
)
TAKE_REQUEST_SQL = (
    "DELETE FROM pgrag.oauth_requests WHERE id_hash = %s AND expires_at > now()"
    " RETURNING client_id, params"
)
PRUNE_REQUESTS_SQL = "DELETE FROM pgrag.oauth_requests WHERE expires_at < now()"
CREATE_GRANT_SQL = (
    "INSERT INTO pgrag.oauth_grants (client_id, owner, scopes, collections, resource)"
    " VALUES (%s, %s, %s, %s, %s) RETURNING id"
)
SAVE_CODE_SQL = (
    "INSERT INTO pgrag.oauth_codes (code_hash, grant_id, code_challenge, redirect_uri,"
    " redirect_explicit, expires_at) VALUES (%s, %s, %s, %s, %s, now() + make_interval(secs => %s))"
)
GRANT_COLUMNS = (
    "g.id, g.client_id, g.owner, g.scopes, g.collections, g.resource, g.revoked_at IS NOT NULL,"
    " extract(epoch FROM g.created_at)"
)
LOAD_CODE_SQL = (
    f"SELECT {GRANT_COLUMNS}, c.code_challenge, c.redirect_uri, c.redirect_explicit,"
    " extract(epoch FROM c.expires_at), c.used_at IS NOT NULL"
    " FROM pgrag.oauth_codes c JOIN pgrag.oauth_grants g ON g.id = c.grant_id"
    " WHERE c.code_hash = %s"
)
USE_CODE_SQL = (
    "UPDATE pgrag.oauth_codes SET used_at = now() WHERE code_hash = %s AND used_at IS NULL"
    " RETURNING 1"
)
SAVE_TOKEN_SQL = (  # never past the grant's own end: created_at + its lifetime
    "INSERT INTO pgrag.oauth_tokens (token_hash, grant_id, kind, expires_at)"
    " SELECT %s, g.id, %s, least(now() + make_interval(secs => %s),"
    " g.created_at + make_interval(secs => %s))"
    " FROM pgrag.oauth_grants g WHERE g.id = %s"
    " RETURNING extract(epoch FROM expires_at)::bigint"
)
LOAD_TOKEN_SQL = (
    f"SELECT {GRANT_COLUMNS}, extract(epoch FROM t.expires_at)::bigint, t.used_at IS NOT NULL"
    " FROM pgrag.oauth_tokens t JOIN pgrag.oauth_grants g ON g.id = t.grant_id"
    " WHERE t.token_hash = %s AND t.kind = %s"
)
ROTATE_SQL = (
    "UPDATE pgrag.oauth_tokens SET used_at = now()"
    " WHERE token_hash = %s AND kind = 'refresh' AND used_at IS NULL RETURNING 1"
)
REVOKE_GRANT_SQL = (
    "UPDATE pgrag.oauth_grants SET revoked_at = now() WHERE id = %s AND revoked_at IS NULL"
)
LIST_GRANTS_SQL = (  # with its last use and how long its newest tokens live
    f"SELECT {GRANT_COLUMNS}, cl.info ->> 'client_name', g.created_at,"
    " coalesce(cl.info -> 'redirect_uris', '[]'::jsonb), u.last_used, u.access_until,"
    " u.refresh_until"
    " FROM pgrag.oauth_grants g JOIN pgrag.oauth_clients cl ON cl.client_id = g.client_id"
    " CROSS JOIN LATERAL (SELECT max(t.created_at) AS last_used,"
    " max(t.expires_at) FILTER (WHERE t.kind = 'access') AS access_until,"
    " max(t.expires_at) FILTER (WHERE t.kind = 'refresh' AND t.used_at IS NULL)"
    " AS refresh_until FROM pgrag.oauth_tokens t WHERE t.grant_id = g.id) u"
    " WHERE g.revoked_at IS NULL ORDER BY g.created_at DESC"
)


@dataclass(frozen=True)
class Grant:
    """One consent: what a client may do, for whom, on which collections."""

    id: int
    client_id: str
    owner: str
    scopes: list[str]
    collections: list[str] | None  # None: every collection
    resource: str
    revoked: bool
    created_at: float  # epoch seconds: the grant's absolute lifetime counts from here


@dataclass(frozen=True)
class StoredCode:
    grant: Grant
    code_challenge: str
    redirect_uri: str
    redirect_explicit: bool
    expires_at: float
    used: bool


@dataclass(frozen=True)
class StoredToken:
    grant: Grant
    expires_at: int
    used: bool  # a refresh token already rotated


@dataclass(frozen=True)
class ConnectedClient:
    grant: Grant
    client_name: str | None
    created_at: datetime
    redirect_uris: list[str]
    last_used: datetime | None  # the newest token issued under the grant (code or refresh)
    access_until: datetime | None  # the newest access token's expiry
    refresh_until: datetime | None  # the unrotated refresh token's expiry


def _grant(row: tuple[Any, ...]) -> Grant:
    return Grant(
        int(row[0]), row[1], row[2], list(row[3]), row[4], row[5], bool(row[6]), float(row[7])
    )


async def save_client(
    conn: psycopg.AsyncConnection, client_id: str, info: dict[str, Any], *, unused_cap: int
) -> bool:
    """Store a client (or its changed metadata); False when it is new and `unused_cap`
    clients that were never granted anything exist already."""
    if await (await conn.execute(UPDATE_CLIENT_SQL, (Jsonb(info), client_id))).fetchone():
        return True
    added = await conn.execute(ADD_CLIENT_SQL, (client_id, Jsonb(info), unused_cap))
    return await added.fetchone() is not None


async def prune_clients(conn: psycopg.AsyncConnection, unused_for_s: int) -> None:
    """Forget clients registered `unused_for_s` ago that were never granted anything."""
    await conn.execute(PRUNE_CLIENTS_SQL, (unused_for_s,))


async def load_client(conn: psycopg.AsyncConnection, client_id: str) -> dict[str, Any] | None:
    row = await (await conn.execute(LOAD_CLIENT_SQL, (client_id,))).fetchone()
    return dict(row[0]) if row else None


async def save_request(
    conn: psycopg.AsyncConnection,
    id_hash: str,
    client_id: str,
    params: dict[str, Any],
    ttl_s: int,
    cap: int,
) -> bool:
    """Park a request; False when `cap` unexpired requests are pending already."""
    await conn.execute(PRUNE_REQUESTS_SQL)
    saved = await conn.execute(SAVE_REQUEST_SQL, (id_hash, client_id, Jsonb(params), ttl_s, cap))
    return await saved.fetchone() is not None


async def load_request(
    conn: psycopg.AsyncConnection, id_hash: str, *, take: bool = False
) -> tuple[str, dict[str, Any]] | None:
    """A pending authorization request (client id, parameters); `take` deletes it."""
    query = TAKE_REQUEST_SQL if take else LOAD_REQUEST_SQL
    row = await (await conn.execute(query, (id_hash,))).fetchone()
    return (str(row[0]), dict(row[1])) if row else None


async def create_grant(
    conn: psycopg.AsyncConnection,
    client_id: str,
    owner: str,
    scopes: list[str],
    collections: list[str] | None,
    resource: str,
) -> int:
    row = await one_row(conn, CREATE_GRANT_SQL, (client_id, owner, scopes, collections, resource))
    return int(row[0])


async def save_code(
    conn: psycopg.AsyncConnection,
    code_hash: str,
    grant_id: int,
    challenge: str,
    redirect: tuple[str, bool],
    ttl_s: int,
) -> None:
    uri, explicit = redirect
    await conn.execute(SAVE_CODE_SQL, (code_hash, grant_id, challenge, uri, explicit, ttl_s))


async def load_code(conn: psycopg.AsyncConnection, code_hash: str) -> StoredCode | None:
    row = await (await conn.execute(LOAD_CODE_SQL, (code_hash,))).fetchone()
    if row is None:
        return None
    return StoredCode(_grant(row), row[8], row[9], bool(row[10]), float(row[11]), bool(row[12]))


async def use_code(conn: psycopg.AsyncConnection, code_hash: str) -> bool:
    """Mark a code used; False when it already was (a replay)."""
    return await (await conn.execute(USE_CODE_SQL, (code_hash,))).fetchone() is not None


async def save_token(
    conn: psycopg.AsyncConnection,
    token_hash: str,
    grant_id: int,
    kind: str,
    ttl_s: tuple[int, int],
) -> int:
    """Save a token living `ttl_s[0]` seconds but never past the grant's creation plus
    `ttl_s[1]`; its expiry (epoch seconds)."""
    ttl, lifetime = ttl_s
    row = await one_row(conn, SAVE_TOKEN_SQL, (token_hash, kind, ttl, lifetime, grant_id))
    return int(row[0])


async def load_token(
    conn: psycopg.AsyncConnection, token_hash: str, kind: str
) -> StoredToken | None:
    row = await (await conn.execute(LOAD_TOKEN_SQL, (token_hash, kind))).fetchone()
    return StoredToken(_grant(row), int(row[8]), bool(row[9])) if row else None


async def rotate(conn: psycopg.AsyncConnection, token_hash: str) -> bool:
    """Mark a refresh token used; False when it already was (a replay)."""
    return await (await conn.execute(ROTATE_SQL, (token_hash,))).fetchone() is not None


async def revoke_grant(conn: psycopg.AsyncConnection, grant_id: int) -> None:
    await conn.execute(REVOKE_GRANT_SQL, (grant_id,))


async def connected_clients(conn: psycopg.AsyncConnection) -> list[ConnectedClient]:
    rows = await (await conn.execute(LIST_GRANTS_SQL)).fetchall()
    return [
        ConnectedClient(_grant(r), r[8], r[9], [str(u) for u in r[10]], r[11], r[12], r[13])
        for r in rows
    ]
