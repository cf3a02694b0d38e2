"""OAuth requests pgrag must refuse, each with the error a client can act on: PKCE
missing, wrong or `plain`; redirect URI mismatch; a reused or expired code; an expired
token; another resource; a refresh token replayed after rotation (the family ends);
scope escalation at every step; consent without the CSRF token."""

from __future__ import annotations

import hashlib

import httpx2
import psycopg

from tests.support.kb_server import HttpServer
from tests.support.oauth import (
    ALPHA,
    BETA,
    REDIRECT,
    SCOPED_KEY,
    Flow,
    bearer,
    hidden,
    query_of,
)

pytest_plugins = ("tests.support.oauth_fixtures",)


def answers(base: str, token: str) -> int:
    return httpx2.get(base + "/api/search?q=lighthouse", headers=bearer(token)).status_code


def error_of(r: httpx2.Response) -> str:
    return str(r.json()["error"])


def test_pkce_verifier_must_match_and_plain_is_refused(flow: Flow) -> None:
    code = flow.code()
    missing = flow.token(grant_type="authorization_code", code=code, redirect_uri=REDIRECT)
    assert missing.status_code == 400 and error_of(missing) == "invalid_request"
    wrong = flow.exchange(code, code_verifier="x" * 50)
    assert wrong.status_code == 400 and error_of(wrong) == "invalid_grant"
    plain = flow.authorize(code_challenge_method="plain")
    assert plain.status_code == 302  # a valid client and redirect: the error goes back to it
    answer = query_of(plain.headers["location"])
    assert answer["error"] == "invalid_request" and "code" not in answer


def test_redirect_uri_must_be_the_registered_one(flow: Flow) -> None:
    elsewhere = flow.authorize(redirect_uri="https://attacker.example/cb")
    assert elsewhere.status_code == 400 and "location" not in elsewhere.headers  # never redirected
    assert error_of(elsewhere) == "invalid_request"
    code = flow.code()
    r = flow.exchange(code, redirect_uri="http://127.0.0.1:9/other")
    assert r.status_code == 400 and error_of(r) == "invalid_request"


def test_a_reused_code_is_refused_and_ends_its_tokens(flow: Flow) -> None:
    code = flow.code()
    first = flow.exchange(code)
    assert first.status_code == 200
    again = flow.exchange(code)
    assert again.status_code == 400 and error_of(again) == "invalid_grant"
    assert answers(flow.base, first.json()["access_token"]) == 401


def test_expired_code_and_expired_token(flow: Flow, oauth_dsn: str) -> None:
    """Expiry set in the past in the database (no waiting): both refused."""
    code = flow.code()
    with psycopg.connect(oauth_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgrag.oauth_codes SET expires_at = now() - interval '1 second'"
            " WHERE code_hash = %s",
            (hashlib.sha256(code.encode()).hexdigest(),),
        )
    r = flow.exchange(code)
    assert r.status_code == 400 and error_of(r) == "invalid_grant"
    token = flow.tokens()["access_token"]
    assert answers(flow.base, token) == 200
    with psycopg.connect(oauth_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgrag.oauth_tokens SET expires_at = now() - interval '1 second'"
            " WHERE token_hash = %s",
            (hashlib.sha256(token.encode()).hexdigest(),),
        )
    assert answers(flow.base, token) == 401


def test_a_token_for_another_resource_is_not_issued(flow: Flow) -> None:
    r = flow.authorize(resource="https://other.example/mcp")
    assert r.status_code == 302
    assert query_of(r.headers["location"])["error"] == "invalid_target"


def test_a_replayed_refresh_token_ends_the_family(flow: Flow) -> None:
    first = flow.tokens()
    second = flow.refresh(first["refresh_token"]).json()
    assert answers(flow.base, second["access_token"]) == 200
    replay = flow.refresh(first["refresh_token"])
    assert replay.status_code == 400 and error_of(replay) == "invalid_grant"
    assert answers(flow.base, second["access_token"]) == 401
    assert error_of(flow.refresh(second["refresh_token"])) == "invalid_grant"


def test_scope_escalation_is_refused(oauth_http: HttpServer) -> None:
    with httpx2.Client(timeout=30) as http:
        reader = Flow(oauth_http.base, http)
        reader.register(scope="pgrag:read")
        r = reader.authorize(scope="pgrag:read pgrag:write")
        assert query_of(r.headers["location"])["error"] == "invalid_scope"
        granted = reader.tokens(access="read")
        r = reader.refresh(granted["refresh_token"], scope="pgrag:read pgrag:write")
        assert r.status_code == 400 and error_of(r) == "invalid_scope"
        asked_read = reader.authorize(scope="pgrag:read")
        r = reader.consent(asked_read.headers["location"], access="write")
        assert r.status_code == 400 and "location" not in r.headers


def test_an_owner_grants_no_more_than_they_read(oauth_http: HttpServer) -> None:
    with httpx2.Client(timeout=30) as http:
        f = Flow(oauth_http.base, http)
        f.register()
        for collections in ((BETA,), ("*",), (ALPHA, BETA), ()):
            started = f.authorize()
            r = f.consent(started.headers["location"], key=SCOPED_KEY, collections=collections)
            assert r.status_code == (403 if collections else 400), collections
            assert "location" not in r.headers
        token = f.tokens(key=SCOPED_KEY, collections=(ALPHA,))["access_token"]
        hits = httpx2.get(
            f.base + "/api/search", params={"q": "lighthouse", "limit": 10}, headers=bearer(token)
        ).json()["results"]
        assert [h["path"] for h in hits] == ["alpha.md"]


def test_consent_needs_the_csrf_token(flow: Flow) -> None:
    started = flow.authorize()
    consent_url = started.headers["location"]
    flow.consent(consent_url, decision="deny")  # signs in (and denies this first request)
    started = flow.authorize()
    request_id = query_of(started.headers["location"])["request"]
    form = {"request": request_id, "decision": "allow", "collection": "*", "access": "read"}
    for csrf in ({}, {"csrf": "forged"}):
        r = flow.http.post(flow.base + "/console/oauth/consent", data={**form, **csrf})
        assert r.status_code == 403 and "location" not in r.headers
    with httpx2.Client(
        timeout=30
    ) as stranger:  # another browser, its own CSRF token: not signed in
        page = stranger.get(started.headers["location"])
        r = stranger.post(
            flow.base + "/console/oauth/consent", data={**form, "csrf": hidden(page.text, "csrf")}
        )
        assert r.status_code == 303 and r.headers["location"] == "/console/login"
    r = flow.consent(started.headers["location"])  # the real owner still can
    assert r.status_code == 303 and "code" in query_of(r.headers["location"])
