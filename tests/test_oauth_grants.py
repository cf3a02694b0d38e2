"""How long an OAuth grant lasts, and what MCP clients send: a grant ends when the key or
password that approved it is gone (another `pgrag serve` on the same database with other
keys stands for the restart), and at its absolute lifetime however often it is refreshed;
public clients revoke; a `resource` naming the MCP endpoint is accepted, and the protected
resource metadata is served in RFC 9728's path form too."""

from __future__ import annotations

import contextlib
import hashlib

import httpx2
import psycopg

from tests.support.kb_server import HttpServer
from tests.support.oauth import (
    ADMIN_PASSWORD,
    ALPHA,
    BETA,
    KEY,
    SCOPED_KEY,
    Flow,
    bearer,
    oauth_server,
)

pytest_plugins = ("tests.support.oauth_fixtures",)


def status(base: str, token: str) -> int:
    return httpx2.get(base + "/api/search?q=lighthouse", headers=bearer(token)).status_code


def approved(http: httpx2.Client, base: str, key: str, *collections: str) -> dict[str, str]:
    """Tokens of a new client, approved by `key` (a browser session of its own)."""
    f = Flow(base, http)
    f.register()
    tokens = f.tokens(key=key, collections=collections or ("*",))
    return {**tokens, "client_id": f.client_id}


def test_a_grant_ends_with_the_key_or_password_that_approved_it(
    oauth_http: HttpServer, oauth_dsn: str
) -> None:
    with contextlib.ExitStack() as stack:
        http = [stack.enter_context(httpx2.Client(timeout=30)) for _ in range(3)]
        by_key = approved(http[0], oauth_http.base, SCOPED_KEY, ALPHA)
        by_password = approved(http[1], oauth_http.base, ADMIN_PASSWORD, ALPHA, BETA)
        by_owner = approved(http[2], oauth_http.base, KEY)
    keys = {"PGRAG_API_KEYS": KEY, "PGRAG_ADMIN_PASSWORD": "a new passphrase"}
    with (
        oauth_server(oauth_dsn, PGRAG_PUBLIC_URL=oauth_http.base, **keys) as after,
        httpx2.Client(timeout=30) as http_after,
    ):
        for ended in (by_key, by_password):
            assert status(after.base, ended["access_token"]) == 401
            moved = Flow(after.base, http_after, client_id=ended["client_id"])
            r = moved.refresh(ended["refresh_token"])
            assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
        assert status(after.base, by_owner["access_token"]) == 200  # its key is still set
        moved = Flow(after.base, http_after, client_id=by_owner["client_id"])
        assert moved.refresh(by_owner["refresh_token"]).status_code == 200


def test_a_grant_reads_no_more_than_its_approver_does_today(
    oauth_http: HttpServer, flow: Flow, oauth_dsn: str
) -> None:
    """The owner key granted everything; restarted limited to alpha, so is the grant."""
    token = flow.tokens(key=KEY)["access_token"]
    keys = {"PGRAG_API_KEYS": f"{KEY}={ALPHA}"}
    with oauth_server(oauth_dsn, PGRAG_PUBLIC_URL=oauth_http.base, **keys) as after:
        r = httpx2.get(
            after.base + "/api/search",
            params={"q": "lighthouse", "limit": 10},
            headers=bearer(token),
        )
        assert r.status_code == 200, r.text
        assert [hit["path"] for hit in r.json()["results"]] == ["alpha.md"]


def _grant_of(dsn: str, refresh_token: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT grant_id FROM pgrag.oauth_tokens WHERE token_hash = %s",
            (hashlib.sha256(refresh_token.encode()).hexdigest(),),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_refreshing_never_extends_a_grant(flow: Flow, oauth_dsn: str) -> None:
    """The consent is moved back in time (no waiting): a refresh token issued now expires
    with the grant, not a full lifetime later; past the lifetime nothing refreshes."""
    tokens = flow.tokens()
    grant = _grant_of(oauth_dsn, tokens["refresh_token"])
    with psycopg.connect(oauth_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgrag.oauth_grants SET created_at = now() - interval '29 days' WHERE id = %s",
            (grant,),
        )
    fresh = flow.refresh(tokens["refresh_token"]).json()
    with psycopg.connect(oauth_dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT bool_and(t.expires_at <= g.created_at + interval '30 days'), count(*)"
            " FROM pgrag.oauth_tokens t JOIN pgrag.oauth_grants g ON g.id = t.grant_id"
            " WHERE t.token_hash = ANY(%s)",
            (
                [
                    hashlib.sha256(fresh[k].encode()).hexdigest()
                    for k in ("access_token", "refresh_token")
                ],
            ),
        ).fetchone()
    assert row == (True, 2)
    with psycopg.connect(oauth_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgrag.oauth_grants SET created_at = now() - interval '31 days' WHERE id = %s",
            (grant,),
        )
    r = flow.refresh(fresh["refresh_token"])
    assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
    assert status(flow.base, fresh["access_token"]) == 401


def test_a_public_client_revokes_without_a_secret(flow: Flow) -> None:
    asm = httpx2.get(flow.base + "/.well-known/oauth-authorization-server").json()
    assert "none" in asm["token_endpoint_auth_methods_supported"]
    assert "none" in asm["revocation_endpoint_auth_methods_supported"]
    tokens = flow.tokens()
    r = flow.http.post(
        flow.base + "/revoke", data={"client_id": flow.client_id, "token": tokens["refresh_token"]}
    )
    assert r.status_code == 200, r.text
    assert status(flow.base, tokens["access_token"]) == 401
    assert flow.refresh(tokens["refresh_token"]).json()["error"] == "invalid_grant"


def test_the_mcp_endpoint_is_a_resource_too(flow: Flow) -> None:
    prm = httpx2.get(flow.base + "/.well-known/oauth-protected-resource/mcp")
    assert prm.status_code == 200
    assert prm.json()["resource"] == flow.base + "/mcp"
    assert prm.json()["authorization_servers"] == [flow.base]
    started = flow.authorize(resource=flow.base + "/mcp")
    assert started.status_code == 302 and "/console/oauth/consent" in started.headers["location"]
    code = flow.consent(started.headers["location"]).headers["location"]
    code = httpx2.URL(code).params["code"]
    tokens = flow.exchange(code, resource=flow.base + "/mcp")
    assert tokens.status_code == 200, tokens.text
    assert status(flow.base, tokens.json()["access_token"]) == 200
