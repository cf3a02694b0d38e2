"""An external authorization server instead of pgrag's own (PGRAG_OAUTH_ISSUER): a small
issuer written for the tests (an RSA key, its JWKS served over loopback HTTP, tokens
signed with PyJWT). pgrag checks signature, issuer, audience and expiry, and reads the
collections from a claim; its own authorization endpoints are off."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from tests.support.kb_server import HttpServer
from tests.support.oauth import ALPHA, BETA, KEY, bearer, json_server, oauth_server

pytest_plugins = ("tests.support.oauth_fixtures",)
KEY_ID = "test-key"


class Issuer:
    """Signs access tokens as an identity provider would."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwks(self) -> dict[str, Any]:
        jwk = RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": KEY_ID, "use": "sig", "alg": "RS256"}]}

    def token(self, audience: str, key: Any = None, **claims: Any) -> str:
        body = {
            "iss": self.base,
            "aud": audience,
            "sub": "user-1",
            "exp": int(time.time()) + 300,
            "scope": "pgrag:read",
            "pgrag_collections": [ALPHA],
            **claims,
        }
        return jwt.encode(body, key or self.key, algorithm="RS256", headers={"kid": KEY_ID})


@pytest.fixture(scope="module")
def issuer_and_server(oauth_dsn: str) -> Iterator[tuple[Issuer, HttpServer]]:
    docs: dict[str, Any] = {}
    with json_server(docs) as base:
        issuer = Issuer(base)
        docs["/jwks.json"] = issuer.jwks()
        env = {"PGRAG_OAUTH_ISSUER": base, "PGRAG_OAUTH_JWKS_URL": base + "/jwks.json"}
        with oauth_server(oauth_dsn, **env) as server:
            yield issuer, server


def found(server: HttpServer, token: str) -> tuple[int, set[str]]:
    r = httpx2.get(
        server.base + "/api/search", params={"q": "lighthouse", "limit": 10}, headers=bearer(token)
    )
    paths = {Path(h["path"]).stem for h in r.json()["results"]} if r.status_code == 200 else set()
    return r.status_code, paths


def test_external_tokens_read_their_claimed_collections(
    issuer_and_server: tuple[Issuer, HttpServer],
) -> None:
    issuer, server = issuer_and_server
    prm = httpx2.get(server.base + "/.well-known/oauth-protected-resource").json()
    assert prm["authorization_servers"] == [issuer.base] and prm["resource"] == server.base
    no_own_server = httpx2.get(server.base + "/authorize", headers=bearer(KEY))
    assert no_own_server.status_code == 404
    assert found(server, issuer.token(server.base)) == (200, {ALPHA})
    assert found(server, issuer.token(server.base, pgrag_collections="*")) == (200, {ALPHA, BETA})
    assert found(server, KEY) == (200, {ALPHA, BETA})  # keys keep working


def test_external_tokens_are_checked(issuer_and_server: tuple[Issuer, HttpServer]) -> None:
    issuer, server = issuer_and_server
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = {
        "another audience": issuer.token("https://other.example"),
        "expired": issuer.token(server.base, exp=int(time.time()) - 60),
        "another issuer": issuer.token(server.base, iss="https://evil.example"),
        "another key": issuer.token(server.base, key=stranger),
        "no collections claim": issuer.token(server.base, pgrag_collections=None),
    }
    for why, token in refused.items():
        r = httpx2.get(server.base + "/api/search?q=x", headers=bearer(token))
        assert r.status_code == 401, why
        assert 'error="invalid_token"' in r.headers["www-authenticate"], why


def test_a_read_scope_cannot_write(issuer_and_server: tuple[Issuer, HttpServer]) -> None:
    issuer, server = issuer_and_server
    url = server.base + "/api/documents/00000000-0000-0000-0000-000000000000"
    r = httpx2.delete(url, headers=bearer(issuer.token(server.base)))
    assert r.status_code == 403 and 'error="insufficient_scope"' in r.headers["www-authenticate"]
    writer = issuer.token(server.base, scope="pgrag:read pgrag:write")
    assert httpx2.delete(url, headers=bearer(writer)).status_code == 404
