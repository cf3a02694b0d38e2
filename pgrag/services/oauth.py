"""The authorization server's decisions shared by the token endpoints (pgrag/http/oauth)
and the consent page (pgrag/web/pages/consent.py): pending requests, what an owner may
grant, codes and tokens issued under a grant, and revocation. Codes, tokens and request
ids are random (`secrets`) and kept only as their SHA-256."""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from psycopg_pool import AsyncConnectionPool

from pgrag.errors import ErrorCode, Forbidden, InvalidArgument, NotFound, PgragError
from pgrag.store import oauth as store

REQUEST_TTL_S = 600  # the owner has ten minutes to sign in and decide
CODE_TTL_S = 60
MAX_PENDING = 1000  # unexpired authorization requests: what a stranger can park at once
MAX_REQUEST_BYTES = 4096  # one parked request (its state, redirect URI, challenge...)
NAME_SHOWN = 80  # characters of a client's name a page shows


class OAuthScope(StrEnum):
    READ = "pgrag:read"
    WRITE = "pgrag:write"


SCOPES = [s.value for s in OAuthScope]


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret() -> str:
    return secrets.token_urlsafe(32)  # 256 bits


@dataclass(frozen=True)
class Pending:
    """An authorization request waiting for the owner's decision, as the page shows it."""

    request_id: str
    client_id: str
    client_name: str
    redirect_uri: str
    scopes: list[str]
    params: dict[str, Any]


async def save_pending(pool: AsyncConnectionPool, client_id: str, params: dict[str, Any]) -> str:
    """Store a validated authorization request; its id (the only copy) goes in the URL.
    Anyone may start one, so each is bounded in size, and so is how many wait at once."""
    if len(json.dumps(params)) > MAX_REQUEST_BYTES:
        raise InvalidArgument(
            f"the authorization request is larger than {MAX_REQUEST_BYTES} bytes (its state?)"
        )
    request_id = new_secret()
    async with pool.connection() as conn:
        saved = await store.save_request(
            conn, digest(request_id), client_id, params, REQUEST_TTL_S, MAX_PENDING
        )
    if not saved:
        raise PgragError(
            f"{MAX_PENDING} authorization requests are waiting already: try again in minutes",
            code=ErrorCode.RATE_LIMITED,
        )
    return request_id


def shown_name(name: str) -> str:
    """A client's name as a page shows it: the client chose it, so it is cut short."""
    return name if len(name) <= NAME_SHOWN else name[: NAME_SHOWN - 1] + "…"


async def pending(pool: AsyncConnectionPool, request_id: str) -> Pending:
    async with pool.connection() as conn:
        found = await store.load_request(conn, digest(request_id))
        client = await store.load_client(conn, found[0]) if found else None
    if found is None or client is None:
        raise NotFound(
            "this authorization request is unknown or expired: start again from the client"
        )
    client_id, params = found
    return Pending(
        request_id,
        client_id,
        shown_name(str(client.get("client_name") or client_id)),
        str(params["redirect_uri"]),
        # no scope asked: what the client registered for (RFC 6749 §3.3 lets the server pick)
        list(params.get("scopes") or str(client.get("scope") or OAuthScope.READ).split()),
        params,
    )


def with_query(uri: str, **params: str | None) -> str:
    """`uri` with these query parameters appended (its own kept)."""
    parts = urlsplit(uri)
    extra = urlencode({k: v for k, v in params.items() if v is not None})
    query = f"{parts.query}&{extra}" if parts.query else extra
    return urlunsplit(parts._replace(query=query))


@dataclass(frozen=True)
class Decision:
    """What the owner granted: scopes (a subset of those requested) on collections."""

    scopes: list[str]
    collections: list[str] | None  # None: every collection


def check_decision(asked: Pending, decision: Decision, owner_scope: list[str] | None) -> None:
    """An owner grants at most what was asked and at most what they may read themselves."""
    if not decision.scopes or not set(decision.scopes) <= set(asked.scopes):
        raise InvalidArgument("grant one of the requested scopes: " + ", ".join(asked.scopes))
    if owner_scope is None:
        return
    if decision.collections is None or not set(decision.collections) <= set(owner_scope):
        raise Forbidden(
            "you may grant only collections you can read: " + ", ".join(owner_scope),
            detail={"scope": owner_scope},
        )


async def approve(
    pool: AsyncConnectionPool, request_id: str, owner: str, decision: Decision, issuer: str
) -> str:
    """Record the grant and a code for it; the URL the browser goes back to the client with."""
    code = new_secret()
    async with pool.connection() as conn:
        found = await store.load_request(conn, digest(request_id), take=True)
        if found is None:
            raise NotFound("this authorization request is unknown or expired: start again")
        client_id, params = found
        grant_id = await store.create_grant(
            conn, client_id, owner, decision.scopes, decision.collections, params["resource"]
        )
        redirect = (str(params["redirect_uri"]), bool(params["redirect_uri_provided_explicitly"]))
        challenge = str(params["code_challenge"])
        await store.save_code(conn, digest(code), grant_id, challenge, redirect, CODE_TTL_S)
    return with_query(redirect[0], code=code, state=params.get("state"), iss=issuer)


async def deny(pool: AsyncConnectionPool, request_id: str, issuer: str) -> str:
    async with pool.connection() as conn:
        found = await store.load_request(conn, digest(request_id), take=True)
    if found is None:
        raise NotFound("this authorization request is unknown or expired: start again")
    params = found[1]
    return with_query(
        str(params["redirect_uri"]),
        error="access_denied",
        error_description="the owner refused access",
        state=params.get("state"),
        iss=issuer,
    )


async def revoke(pool: AsyncConnectionPool, grant_id: int) -> None:
    async with pool.connection() as conn:
        await store.revoke_grant(conn, grant_id)
