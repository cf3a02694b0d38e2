"""OAuth test helpers: a small two-collection server with OAuth on (hash embeddings, an
API key and an admin password), and a client that walks the authorization code flow with
PKCE through the consent page over plain HTTP (httpx2), as a browser would."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import secrets
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2

from tests.conftest import create_database, drop_database, pgrag_cmd
from tests.support.kb_server import HASH_MODEL, HttpServer, child_env, http_server

KEY = "owner-key"
SCOPED_KEY = "alpha-key"
ADMIN_PASSWORD = "correct horse battery staple"
ALPHA, BETA = "alpha", "beta"
TEXTS = {
    ALPHA: "Alpha notes: the lighthouse keeper logs the tide every morning.",
    BETA: "Beta notes: the lighthouse budget for paint is secret beta money.",
}
REDIRECT = "http://127.0.0.1:9/callback"  # never reached: the tests read the Location


@contextlib.contextmanager
def oauth_database(server_dsn: str, tmp: Path) -> Iterator[str]:
    """A database with collections alpha and beta, one lighthouse note each (alpha.md,
    beta.md)."""
    dsn = create_database(server_dsn)
    try:
        for name, text in TEXTS.items():
            (tmp / name).mkdir()
            (tmp / name / f"{name}.md").write_text(text + "\n")
            cmd = pgrag_cmd("--database-url", dsn, "--embedding-model", HASH_MODEL, "ingest")
            done = subprocess.run(
                [*cmd, "-q", "-c", name, str(tmp / name)],
                capture_output=True,
                text=True,
                timeout=300,
                env=child_env(),
            )
            assert done.returncode == 0, done.stderr
        yield dsn
    finally:
        drop_database(server_dsn, dsn)


@contextlib.contextmanager
def oauth_server(dsn: str, log_path: Path | None = None, **env: str) -> Iterator[HttpServer]:
    settings = {
        "PGRAG_API_KEYS": f"{KEY},{SCOPED_KEY}={ALPHA}",
        "PGRAG_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "PGRAG_READ_ONLY": "false",
        "PGRAG_TOOLSETS": "core,write",
        "PGRAG_OAUTH_LOOPBACK_CLIENTS": "true",  # client ID documents served by the tests
        "PGRAG_OAUTH_REGISTRATIONS_PER_HOUR": "1000",  # every test registers from 127.0.0.1
        **env,
    }
    with http_server(
        dsn, "--embedding-model", HASH_MODEL, env=settings, log_path=log_path
    ) as server:
        yield server


@contextlib.contextmanager
def json_server(docs: dict[str, Any], hosts: list[str] | None = None) -> Iterator[str]:
    """A loopback HTTP server answering each path of `docs` with its JSON (noting each
    request's `Host` in `hosts`); its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if hosts is not None:
                hosts.append(str(self.headers.get("Host")))
            doc = docs.get(self.path)
            body = json.dumps(doc).encode()
            self.send_response(200 if doc is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextlib.contextmanager
def listener() -> Iterator[tuple[int, list[int]]]:
    """A loopback TCP port that counts the connections it accepts (and closes them)."""
    accepted: list[int] = []
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    sock.settimeout(0.2)
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                conn, _ = sock.accept()
                accepted.append(1)
                conn.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1], accepted
    finally:
        stop.set()
        thread.join()
        sock.close()


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).decode().rstrip("=")


def hidden(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found, f"no hidden {name} in the page:\n{html[:2000]}"
    return found.group(1)


def query_of(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


@dataclass
class Flow:
    """One OAuth client against one server, step by step."""

    base: str
    http: httpx2.Client
    client_id: str = ""
    verifier: str = ""

    def register(self, scope: str | None = None, redirect: str = REDIRECT) -> dict[str, Any]:
        body: dict[str, Any] = {
            "client_name": "Test Client",
            "redirect_uris": [redirect],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
        }
        if scope:
            body["scope"] = scope
        r = self.http.post(self.base + "/register", json=body)
        assert r.status_code == 201, r.text
        self.client_id = r.json()["client_id"]
        return dict(r.json())

    def authorize(self, **overrides: str) -> httpx2.Response:
        """GET /authorize with a fresh PKCE pair; the SDK answers with a redirect."""
        self.verifier, challenge = pkce()
        params = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": REDIRECT,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "st4te",
            "resource": self.base,
            **overrides,
        }
        return self.http.get(self.base + "/authorize", params=params)

    def consent(
        self,
        consent_url: str,
        *,
        key: str = KEY,
        collections: tuple[str, ...] = ("*",),
        access: str = "read",
        decision: str = "allow",
    ) -> httpx2.Response:
        """Sign in on the consent page, then decide; the answer redirects to the client."""
        page = self.http.get(consent_url)
        request_id = query_of(consent_url)["request"]
        if 'action="/console/oauth/consent/signin"' in page.text:
            form = {"csrf": hidden(page.text, "csrf"), "request": request_id, "key": key}
            signed = self.http.post(self.base + "/console/oauth/consent/signin", data=form)
            assert signed.status_code == 303, signed.text
            page = self.http.get(self.base + signed.headers["location"])
        assert page.status_code == 200, page.text
        form = {
            "csrf": hidden(page.text, "csrf"),
            "request": request_id,
            "decision": decision,
            "access": access,
            "collection": list(collections),
        }
        return self.http.post(self.base + "/console/oauth/consent", data=form)

    def code(self, **consent: Any) -> str:
        started = self.authorize()
        assert started.status_code == 302, started.text
        back = self.consent(started.headers["location"], **consent)
        assert back.status_code == 303, back.text
        answer = query_of(back.headers["location"])
        assert answer["iss"] == self.base and answer["state"] == "st4te"
        return answer["code"]

    def token(self, **form: str) -> httpx2.Response:
        return self.http.post(self.base + "/token", data={"client_id": self.client_id, **form})

    def exchange(self, code: str, **overrides: str) -> httpx2.Response:
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "code_verifier": self.verifier,
            "resource": self.base,
        }
        return self.token(**{**form, **overrides})

    def refresh(self, refresh_token: str, **overrides: str) -> httpx2.Response:
        form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
        return self.token(**{**form, **overrides})

    def tokens(self, **consent: Any) -> dict[str, Any]:
        r = self.exchange(self.code(**consent))
        assert r.status_code == 200, r.text
        return dict(r.json())


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
