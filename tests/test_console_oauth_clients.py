"""The connected OAuth clients page in headless Chromium: two clients of the same name are
told apart (client id, redirect host, last use), and a grant whose tokens expired, or whose
access token lapsed unused, does not read as connected."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx2
import psycopg
import pytest
from playwright.sync_api import Browser, Page

from pgrag.services.connected_clients import GrantState, grant_state, redirect_host, short_id
from pgrag.store.oauth import ConnectedClient, Grant
from tests.support.axe import serious_violations
from tests.support.browser import tab
from tests.support.kb_server import HttpServer
from tests.support.oauth import KEY, Flow

pytest_plugins = ("tests.support.console", "tests.support.oauth_fixtures")

EXPIRE_SQL = (
    "UPDATE pgrag.oauth_tokens SET expires_at = now() - interval '1 minute'"
    " WHERE kind = ANY(%s) AND grant_id IN"
    " (SELECT id FROM pgrag.oauth_grants WHERE client_id = %s)"
)


def sign_in(page: Page, base: str) -> None:
    page.goto(base + "/console/login")
    page.get_by_label("API key").fill(KEY)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + "/")


def connected_client(base: str, http: httpx2.Client) -> Flow:
    """A client named "Test Client" that was approved and fetched its tokens."""
    flow = Flow(base, http)
    flow.register()
    flow.tokens()
    return flow


@pytest.mark.requires("chromium")
def test_same_names_told_apart_and_abandoned_grants_not_connected(
    browser: Browser, oauth_http: HttpServer
) -> None:
    base = oauth_http.base
    with httpx2.Client(timeout=30) as http:
        live, idle, expired = (connected_client(base, http) for _ in range(3))
    with psycopg.connect(oauth_http.dsn, autocommit=True) as conn:
        conn.execute(EXPIRE_SQL, (["access"], idle.client_id))  # the refresh token still works
        conn.execute(EXPIRE_SQL, (["access", "refresh"], expired.client_id))
    with tab(browser) as t:
        page = t.page
        sign_in(page, base)
        page.get_by_role("link", name="Connected clients").click()
        page.wait_for_url("**/console/oauth/clients")
        rows = {
            f.client_id: page.locator(f'tr[data-client="{f.client_id}"]')
            for f in (live, idle, expired)
        }
        shown_ids = set()
        for client_id, row in rows.items():
            assert row.locator("td").first.inner_text() == "Test Client"
            cell = row.locator("code.client-id")
            assert cell.get_attribute("title") == client_id  # the full id on hover
            assert client_id.startswith(cell.inner_text().rstrip("…"))
            shown_ids.add(cell.inner_text())
            assert (
                page.locator(f"#cid-{row.get_attribute('data-grant')}").text_content() == client_id
            )
            assert row.locator("td.redirects").inner_text() == "127.0.0.1:9"
            assert row.locator("td.last-used").inner_text() not in ("", "never")
        assert len(shown_ids) == 3  # the same name, three different ids on the page
        assert rows[live.client_id].locator("td.state").inner_text() == "connected"
        idle_state = rows[idle.client_id].locator("td.state").inner_text()
        assert idle_state.startswith("idle since 20"), idle_state
        expired_state = rows[expired.client_id].locator("td.state").inner_text()
        assert expired_state.startswith("expired 20"), expired_state
        assert rows[expired.client_id].get_attribute("data-state") == "expired"
        # the same page in Chinese: the state words too
        page.locator("#lang-zh").click()
        page.wait_for_url("**/console/oauth/clients")
        zh_row = page.locator(f'tr[data-client="{live.client_id}"]')
        assert zh_row.locator("td.state").inner_text() == "已连接"
        assert (
            page.locator(f'tr[data-client="{expired.client_id}"] td.state')
            .inner_text()
            .startswith("已于")
        )
        assert t.errors == []
    with tab(browser, width=390, bypass_csp=True) as t:  # axe-core on a phone's width
        sign_in(t.page, base)
        t.page.goto(base + "/console/oauth/clients")
        assert t.page.locator("tr[data-client]").count() >= 3
        assert serious_violations(t.page) == []


def _found(**times: datetime | None) -> ConnectedClient:
    grant = Grant(1, "c", "key:owner", ["pgrag:read"], None, "http://x", False, 0.0)
    return ConnectedClient(grant, "Test Client", NOW, [], **times)


NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
HOUR = timedelta(hours=1)


@pytest.mark.parametrize(
    ("times", "state"),
    [
        ({"last_used": None, "access_until": None, "refresh_until": None}, GrantState.UNUSED),
        ({"last_used": NOW, "access_until": NOW + HOUR, "refresh_until": NOW}, GrantState.CONNECTED),
        ({"last_used": NOW - 2 * HOUR, "access_until": NOW - HOUR, "refresh_until": NOW + HOUR},
         GrantState.IDLE),
        ({"last_used": NOW - 2 * HOUR, "access_until": NOW - HOUR, "refresh_until": NOW - HOUR},
         GrantState.EXPIRED),
        ({"last_used": NOW - 2 * HOUR, "access_until": NOW - HOUR, "refresh_until": None},
         GrantState.EXPIRED),  # the refresh token was rotated and its successor never saved
    ],
)  # fmt: skip
def test_grant_states(times: dict[str, datetime | None], state: GrantState) -> None:
    assert grant_state(_found(**times), NOW)[0] is state


def test_short_ids_and_redirect_hosts() -> None:
    assert short_id("https://client.example.com/oauth/metadata.json") == "client.exam…"
    assert short_id("abc123") == "abc123"
    assert redirect_host("http://127.0.0.1:33418/callback") == "127.0.0.1:33418"
    assert redirect_host("cursor://anysphere.cursor-retrieval/oauth/callback") == (
        "anysphere.cursor-retrieval"
    )
    assert redirect_host("com.example.app:/callback") == "com.example.app:"
