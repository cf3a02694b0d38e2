"""OAuth with a client pgrag did not write: the official TypeScript SDK's OAuth client
(tests/js/oauth_client.mjs) discovers the authorization server from a 401, registers,
authorizes with PKCE (the consent page driven in headless Chromium), searches over
Streamable HTTP, refreshes, revokes, and is refused after."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Route

from tests.support.browser import chromium, tab
from tests.support.kb_server import HttpServer, child_env
from tests.support.oauth import ALPHA, KEY, oauth_database, oauth_server
from tests.support.prerequisites import JS, NODE22

pytestmark = [pytest.mark.requires("tests/js"), pytest.mark.requires("chromium")]
CALLBACK = "http://127.0.0.1:9/oauth/callback"  # answered by the browser's route, never dialled


@pytest.fixture
def server(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpServer]:
    with (
        oauth_database(server_dsn, tmp_path_factory.mktemp("oauth-sdk")) as dsn,
        oauth_server(dsn) as s,
    ):
        yield s


def _step(node: subprocess.Popen[str]) -> dict[str, Any]:
    assert node.stdout is not None
    line = node.stdout.readline()
    assert line, f"the SDK client stopped: {node.stderr.read() if node.stderr else ''}"
    return dict(json.loads(line))


def _consent(authorize_url: str) -> tuple[str, str]:
    """Sign in on the consent page, grant alpha read-only; (the callback URL, the page text)."""
    with chromium() as browser, tab(browser) as t:
        caught: list[str] = []

        def callback(route: Route) -> None:
            caught.append(route.request.url)
            route.fulfill(status=200, body="done")

        t.page.route(CALLBACK + "**", callback)
        t.page.goto(authorize_url)
        t.page.get_by_label("API key or admin password").fill(KEY)
        t.page.get_by_role("button", name="Sign in").click()
        t.page.wait_for_selector("#consent")
        shown = t.page.inner_text("#consent")
        t.page.get_by_label(ALPHA, exact=True).check()
        t.page.get_by_role("button", name="Allow").click()
        t.page.wait_for_url(CALLBACK + "**")
        assert t.errors == [], t.errors  # no CSP violation, no script error
        return caught[0], shown


def test_the_typescript_sdk_completes_the_flow(server: HttpServer) -> None:
    with subprocess.Popen(
        [str(NODE22), "oauth_client.mjs", server.mcp_url, CALLBACK],
        cwd=JS,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    ) as node:
        try:
            _drive(node, server)
        finally:
            if node.poll() is None:
                node.kill()


def _drive(node: subprocess.Popen[str], server: HttpServer) -> None:
    """Each step the client prints, checked; the browser part done in between."""
    started = _step(node)
    assert started["step"] == "authorize"
    assert started["url"].startswith(server.base + "/authorize?")
    callback, shown = _consent(started["url"])
    assert "TS SDK test client" in shown and CALLBACK in shown
    assert "pgrag:read pgrag:write" in shown  # the scopes the client asked for
    assert node.stdin is not None
    node.stdin.write(callback + "\n")
    node.stdin.flush()
    searched = _step(node)
    assert searched == {"step": "searched", "paths": ["alpha.md"], "scope": "pgrag:read"}
    assert _step(node) == {"step": "refreshed", "rotated": True, "paths": ["alpha.md"]}
    assert _step(node) == {"step": "revoked", "status": 200, "after": "401"}
    assert node.wait(timeout=60) == 0
