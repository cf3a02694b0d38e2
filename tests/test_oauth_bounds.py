"""What a stranger can make the open OAuth endpoints keep: a registration is small, its
fields bounded and its redirect URIs safe; registrations per address and unapproved
clients are capped, and unapproved clients expire; a parked /authorize request is small and
only so many wait; a client's name is cut short on the pages that show it; and on a server
without the loopback opt-in, /authorize never fetches a document from an internal host."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import psycopg
import pytest
from psycopg.types.json import Jsonb

from pgrag.services.oauth import MAX_PENDING
from tests.support.kb_server import HttpServer
from tests.support.oauth import REDIRECT, Flow, listener, oauth_server, query_of

pytest_plugins = ("tests.support.oauth_fixtures",)
CAP = 10  # PGRAG_OAUTH_MAX_UNUSED_CLIENTS of the strict server
PER_HOUR = 12  # its PGRAG_OAUTH_REGISTRATIONS_PER_HOUR


def registration(**fields: Any) -> dict[str, Any]:
    return {
        "client_name": "Bounded",
        "redirect_uris": [REDIRECT],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        **fields,
    }


def register(base: str, body: dict[str, Any]) -> httpx2.Response:
    return httpx2.post(base + "/register", json=body, timeout=30)


def test_a_registration_is_small_and_its_fields_bounded(oauth_http: HttpServer) -> None:
    huge = register(oauth_http.base, registration(client_name="x" * 9000))
    assert huge.status_code == 413, huge.text
    for fields in (
        {"client_name": "x" * 101},
        {"redirect_uris": [f"http://127.0.0.1:9/cb{i}" for i in range(6)]},
        {"contacts": ["a@example.com"] * 11},
        {"client_uri": "https://app.example/" + "p" * 1000},
    ):
        r = register(oauth_http.base, registration(**fields))
        assert r.status_code == 400, (fields, r.text)
        assert r.json()["error"] == "invalid_client_metadata"


@pytest.mark.parametrize(
    "uri",
    [
        "javascript:alert(document.domain)",
        "data:text/html,<script>alert(1)</script>",
        "file:///etc/passwd",
        "http://attacker.example/cb",
        "http://10.0.0.8/cb",
        "https://app.example/cb#frag",
    ],
)
def test_unsafe_redirect_uris_are_refused(oauth_http: HttpServer, uri: str) -> None:
    r = register(oauth_http.base, registration(redirect_uris=[REDIRECT, uri]))
    assert r.status_code == 400, r.text
    assert r.json()["error"] == "invalid_redirect_uri"


def test_safe_redirect_uris_are_accepted(oauth_http: HttpServer) -> None:
    uris = [
        "http://127.0.0.1:33418/callback",
        "http://localhost/cb",
        "http://[::1]:8080/cb",
        "https://app.example/oauth/cb",
        "cursor://anysphere.cursor-retrieval/oauth/callback",
    ]
    r = register(oauth_http.base, registration(redirect_uris=uris))
    assert r.status_code == 201, r.text


def test_an_unsafe_redirect_uri_stored_earlier_is_never_used(flow: Flow, oauth_dsn: str) -> None:
    """A client registered before the rules (its URI written into the database here)."""
    with psycopg.connect(oauth_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgrag.oauth_clients SET info = jsonb_set(info, '{redirect_uris}', %s)"
            " WHERE client_id = %s",
            (Jsonb([REDIRECT, "javascript:alert(1)"]), flow.client_id),
        )
    r = flow.authorize(redirect_uri="javascript:alert(1)")
    assert r.status_code == 400 and "location" not in r.headers
    assert "/console/oauth/consent" in flow.authorize().headers["location"]  # its safe one


def _set_client_name(dsn: str, client_id: str, name: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgrag.oauth_clients SET info = jsonb_set(info, '{client_name}', to_jsonb(%s::text))"
            " WHERE client_id = %s",
            (name, client_id),
        )


def test_a_long_client_name_is_cut_short_on_the_pages(flow: Flow, oauth_dsn: str) -> None:
    """A name stored before the bound (written into the database here) is shown cut."""
    _set_client_name(oauth_dsn, flow.client_id, "N" * 100_000)
    started = flow.authorize()
    page = flow.http.get(started.headers["location"])  # the sign-in page
    assert page.status_code == 200
    assert "N" * 79 + "…" in page.text and "N" * 80 not in page.text
    assert len(page.content) < 20_000
    flow.code()  # the consent page too, signed in
    page = flow.http.get(flow.authorize().headers["location"])
    assert "N" * 79 + "…" in page.text and "N" * 80 not in page.text


def test_a_parked_request_is_small_and_only_so_many_wait(flow: Flow, oauth_dsn: str) -> None:
    big = flow.authorize(state="s" * 5000)
    assert big.status_code == 302
    assert query_of(big.headers["location"])["error"] == "invalid_request"
    with psycopg.connect(oauth_dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pgrag.oauth_requests (id_hash, client_id, params, expires_at)"
            " SELECT 'filler' || i, %s, '{}', now() + interval '10 minutes'"
            " FROM generate_series(1, %s) i",
            (flow.client_id, MAX_PENDING),
        )
    try:
        full = flow.authorize()
        assert full.status_code == 302
        assert query_of(full.headers["location"])["error"] == "temporarily_unavailable"
    finally:
        with psycopg.connect(oauth_dsn, autocommit=True) as conn:
            conn.execute("DELETE FROM pgrag.oauth_requests WHERE id_hash LIKE 'filler%'")
    assert "/console/oauth/consent" in flow.authorize().headers["location"]


@pytest.fixture(scope="module")
def strict(oauth_dsn: str) -> Iterator[HttpServer]:
    """A server with the defaults' SSRF rules (no loopback opt-in) and small limits."""
    limits = {
        "PGRAG_OAUTH_LOOPBACK_CLIENTS": "false",
        "PGRAG_OAUTH_REGISTRATIONS_PER_HOUR": str(PER_HOUR),
        "PGRAG_OAUTH_MAX_UNUSED_CLIENTS": str(CAP),
    }
    with oauth_server(oauth_dsn, **limits) as server:
        yield server


def _age_unused_clients(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgrag.oauth_clients c SET created_at = now() - interval '25 hours'"
            " WHERE NOT EXISTS (SELECT 1 FROM pgrag.oauth_grants g"
            " WHERE g.client_id = c.client_id)"
        )


def test_unapproved_clients_are_capped_and_expire_and_addresses_rationed(
    strict: HttpServer, oauth_dsn: str
) -> None:
    _age_unused_clients(oauth_dsn)  # what other tests left is a day old: pruned
    for _ in range(CAP):
        assert register(strict.base, registration()).status_code == 201
    full = register(strict.base, registration())
    assert full.status_code == 429 and "first approval" in full.json()["error_description"]
    _age_unused_clients(oauth_dsn)
    assert register(strict.base, registration()).status_code == 201  # the old ones are gone
    with psycopg.connect(oauth_dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pgrag.oauth_clients c WHERE NOT EXISTS"
            " (SELECT 1 FROM pgrag.oauth_grants g WHERE g.client_id = c.client_id)"
        ).fetchone()
    assert row is not None and row[0] <= CAP
    spent = register(strict.base, registration())
    assert spent.status_code == 429
    assert "too many registrations" in spent.json()["error_description"]


def test_authorize_fetches_no_document_from_an_internal_host(strict: HttpServer) -> None:
    answers = []
    with listener() as (port, accepted), httpx2.Client(timeout=30) as http:
        for host in ("127.1", "2130706433", "0x7f000001", "localhost"):
            f = Flow(strict.base, http, client_id=f"https://{host}:{port}/client.json")
            answers.append(f.authorize())
    assert accepted == []  # not one connection was made
    for r in answers:
        assert r.status_code == 400
        assert "public host" in r.json()["error_description"]
