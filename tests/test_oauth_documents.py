"""Client ID metadata documents: a client whose client_id is the URL of its metadata
registers nothing; pgrag fetches the document (a real HTTP server here, on loopback, which
the test server allows with PGRAG_OAUTH_LOOPBACK_CLIENTS) and refuses one that is not
HTTPS (loopback aside) or whose client_id is not its URL."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest

from pgrag.http.oauth.client_documents import RefusedDocument, check_url
from tests.support.kb_server import HttpServer
from tests.support.oauth import REDIRECT, Flow, bearer, json_server

pytest_plugins = ("tests.support.oauth_fixtures",)


def metadata(client_id: str) -> dict[str, Any]:
    return {
        "client_id": client_id,
        "client_name": "Document Client",
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }


def test_a_metadata_document_client_completes_the_flow(oauth_http: HttpServer) -> None:
    asm = httpx2.get(oauth_http.base + "/.well-known/oauth-authorization-server").json()
    assert asm["client_id_metadata_document_supported"] is True
    docs: dict[str, Any] = {}
    with json_server(docs) as base, httpx2.Client(timeout=30) as http:
        client_id = base + "/client.json"
        docs["/client.json"] = metadata(client_id)
        f = Flow(oauth_http.base, http, client_id=client_id)
        page = f.http.get(f.authorize().headers["location"])
        assert "Document Client" in page.text
        tokens = f.tokens()
        r = httpx2.get(oauth_http.base + "/api/search?q=x", headers=bearer(tokens["access_token"]))
        assert r.status_code == 200
        assert f.refresh(tokens["refresh_token"]).status_code == 200


def test_a_document_must_name_its_own_url(oauth_http: HttpServer) -> None:
    docs: dict[str, Any] = {}
    with json_server(docs) as base, httpx2.Client(timeout=30) as http:
        docs["/liar.json"] = metadata("https://trusted.example/client.json")
        f = Flow(oauth_http.base, http, client_id=base + "/liar.json")
        r = f.authorize()
        assert r.status_code == 400 and r.json()["error"] == "invalid_request"
        f.client_id = base + "/missing.json"
        assert f.authorize().status_code == 400


def test_a_document_url_must_be_https(oauth_http: HttpServer) -> None:
    with httpx2.Client(timeout=30) as http:
        f = Flow(oauth_http.base, http, client_id="http://93.184.216.34/client.json")
        r = f.authorize()
        assert r.status_code == 400 and r.json()["error"] == "invalid_request"
        assert "HTTPS" in r.json()["error_description"]
    with pytest.raises(RefusedDocument, match="HTTPS"):
        check_url("http://127.0.0.1:8/client.json", loopback_allowed=False)
    check_url("http://127.0.0.1:8/client.json", loopback_allowed=True)
    check_url("https://app.example/oauth/client.json", loopback_allowed=False)
    with pytest.raises(RefusedDocument, match="path"):
        check_url("https://app.example/", loopback_allowed=False)
    with pytest.raises(RefusedDocument, match="credentials"):
        check_url("https://user:pw@app.example/c.json", loopback_allowed=False)


def test_a_refused_document_is_explained_to_the_browser(oauth_http: HttpServer) -> None:
    """The browser gets a readable page with the reason, not the SDK's raw JSON."""
    with json_server({}) as base, httpx2.Client(timeout=30) as http:
        f = Flow(oauth_http.base, http, client_id=base + "/missing.json")
        f.http.headers["Accept"] = "text/html,application/xhtml+xml,*/*;q=0.8"
        r = f.authorize()
    assert r.status_code == 400
    assert r.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in r.headers["content-security-policy"]
    assert "This client cannot sign in" in r.text and "answered HTTP 404" in r.text
