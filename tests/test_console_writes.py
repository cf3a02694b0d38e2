"""The console on servers of their own, in headless Chromium: a writable one without keys
(loopback: no sign-in) with an upload followed to ready with live progress, a deletion, and
the same deletion refused without the session's CSRF token or from a foreign origin; and
one with a key, whose sign-in leaves the key in no URL and no log line."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.support.browser import tab
from tests.support.databases import create_database, drop_database
from tests.support.kb_server import HASH_MODEL, HttpServer, http_server

pytest_plugins = ("tests.support.console",)
pytestmark = pytest.mark.requires("chromium")

NOTE = "Console upload probe: the heron project ships from dock 7 on 2026-03-01.\n"


def test_upload_to_ready_then_delete(
    browser: Browser, writable: HttpServer, tmp_path: Path
) -> None:
    note = tmp_path / "heron_notes.txt"
    note.write_text(NOTE, encoding="utf-8")
    with tab(browser) as t:
        page = t.page
        page.goto(writable.base + "/")  # no keys on loopback: no sign-in
        page.get_by_role("link", name="Upload").click()
        page.get_by_label("Files").set_input_files(str(note))
        page.get_by_label("Collection").fill("uploads")
        with page.expect_response(lambda r: "/console/status.json" in r.url) as first:
            page.get_by_role("button", name="Upload").click()
        assert first.value.json()["status"] in ("waiting", "pending", "processing", "ready")
        state = page.locator("#uploaded .state")
        expect(state).to_have_attribute("data-state", "ready", timeout=60_000)
        assert page.locator("#uploaded progress").get_attribute("value") == "100"
        page.goto(writable.base + "/console/documents?collection=uploads")
        page.get_by_role("link", name="heron_notes.txt").click()
        doc_url = page.url
        assert NOTE.strip() in page.locator("#text-h + details pre").inner_text()
        delete = doc_url + "/delete"
        # refused without the session's token, or from another origin: still there
        assert page.request.post(delete, form={"csrf": "forged"}).status == 403
        csrf = str(page.get_attribute("input[name=csrf]", "value"))
        foreign = page.request.post(
            delete, form={"csrf": csrf}, headers={"Origin": "http://evil.example"}
        )
        assert foreign.status == 403
        assert page.goto(doc_url) is not None and page.locator("#metadata").count() == 1
        page.get_by_text("Delete…").click()
        page.locator("#delete").click()
        page.wait_for_url("**/console/documents?deleted=1")
        assert t.errors == []
        gone = page.goto(doc_url)
        assert gone is not None and gone.status == 404


def test_the_key_stays_out_of_urls_and_the_log(
    browser: Browser, server_dsn: str, template_dsn: str, tmp_path: Path
) -> None:
    key = "console-secret-4f1d"
    dsn = create_database(server_dsn)
    log = tmp_path / "serve.log"
    env = {"PGRAG_LOG_LEVEL": "INFO", "PGRAG_HOME": str(tmp_path / "home")}
    try:
        with (
            http_server(
                dsn, "--api-keys", key, "--embedding-model", HASH_MODEL, env=env, log_path=log
            ) as server,
            tab(browser) as t,
        ):
            urls: list[str] = []
            t.page.on("request", lambda r: urls.append(r.url))
            t.page.goto(server.base + "/")
            t.page.get_by_label("API key").fill(key)
            t.page.get_by_role("button", name="Sign in").click()
            t.page.wait_for_url(server.base + "/")
            t.page.goto(server.base + "/console/documents")
            assert t.errors == []
    finally:
        drop_database(server_dsn, dsn)
    written = log.read_text()
    assert "POST /console/login" in written  # the access log is on, and says nothing more
    assert key not in written and not any(key in u for u in urls)
