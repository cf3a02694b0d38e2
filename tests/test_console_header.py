"""Rough edges of the console's frame (issue 42), in real Chromium: the header says when a
server is read-only or has no sign-in; the OAuth clients page is in the nav of the keys that
may manage it; upload's Collection box starts with the caller's own collection, so a limited
key's upload lands there without typing it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from playwright.sync_api import Browser, expect

from tests.support.browser import tab
from tests.support.databases import create_database, drop_database
from tests.support.kb_server import (
    FULL_KEY,
    HASH_MODEL,
    SCOPED_KEY,
    HttpServer,
    http_server,
)
from tests.test_console import sign_in

pytest_plugins = ("tests.support.kb_server", "tests.support.console")
pytestmark = pytest.mark.requires("chromium")

ADMIN, TEAM, TEAM_COLLECTION = "admin-key-7c1", "team-key-7c1", "team"


@pytest.fixture(scope="module")
def keyed_writable(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpServer]:
    """A writable server with an owner's key and a key limited to one collection."""
    dsn = create_database(server_dsn)
    home = tmp_path_factory.mktemp("pgrag-home")
    env = {"PGRAG_READ_ONLY": "false", "PGRAG_TOOLSETS": "core,write", "PGRAG_HOME": str(home)}
    keys = f"{ADMIN},{TEAM}={TEAM_COLLECTION}"
    try:
        with http_server(dsn, "--api-keys", keys, "--embedding-model", HASH_MODEL, env=env) as s:
            yield s
    finally:
        drop_database(server_dsn, dsn)


def test_the_header_says_read_only_and_no_sign_in(
    browser: Browser, kb_http: HttpServer, writable: HttpServer, keyed_writable: HttpServer
) -> None:
    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)  # read-only, with keys
        assert t.page.locator("#badge-read-only").inner_text() == "read-only"
        assert t.page.locator("#badge-open").count() == 0
        t.page.goto(writable.base + "/")  # writable, no keys (loopback)
        assert t.page.locator("#badge-open").inner_text() == "no sign-in"
        assert t.page.locator("#badge-read-only").count() == 0
        sign_in(t, keyed_writable.base, ADMIN)
        assert t.page.locator(".top .badge").count() == 0
        assert t.errors == []


def test_the_oauth_clients_page_is_in_the_nav(browser: Browser, kb_http: HttpServer) -> None:
    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        t.page.get_by_role("link", name="Connected clients").click()
        t.page.wait_for_url("**/console/oauth/clients")
        assert t.page.locator("h1").inner_text() == "Connected clients"
        link = t.page.get_by_role("link", name="Connected clients")
        assert link.get_attribute("aria-current") == "page"
        assert t.errors == []
    with tab(browser) as t:
        sign_in(t, kb_http.base, SCOPED_KEY)  # may not manage them: not offered
        assert t.page.get_by_role("link", name="Connected clients").count() == 0


def test_a_limited_keys_upload_lands_in_its_own_collection(
    browser: Browser, keyed_writable: HttpServer, tmp_path: Path
) -> None:
    note = tmp_path / "team_note.txt"
    note.write_text("Team note: the kestrel review is on Thursday.\n", encoding="utf-8")
    with tab(browser) as t:
        sign_in(t, keyed_writable.base, ADMIN)
        t.page.get_by_role("link", name="Upload").click()
        assert t.page.get_by_label("Collection").input_value() == "default"
    with tab(browser) as t:
        sign_in(t, keyed_writable.base, TEAM)
        page = t.page
        page.get_by_role("link", name="Upload").click()
        assert page.get_by_label("Collection").input_value() == TEAM_COLLECTION
        page.get_by_label("Files").set_input_files(str(note))
        page.get_by_role("button", name="Upload").click()
        state = page.locator("#uploaded .state")
        expect(state).to_have_attribute("data-state", "ready", timeout=60_000)
        assert t.errors == []
    with psycopg.connect(keyed_writable.dsn) as conn:
        placed = conn.execute(
            "SELECT c.name FROM pgrag.documents d JOIN pgrag.collections c"
            " ON c.id = d.collection_id WHERE d.path LIKE %s",
            ("%team_note.txt",),
        ).fetchall()
    assert placed == [(TEAM_COLLECTION,)]
