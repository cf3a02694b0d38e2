"""Re-ingesting a document from its page, in headless Chromium: on a writable server, the
button re-reads the file through the CLI's Ingestor (also when the file is unchanged), the
page follows the document to ready and then shows the new version's text and chunks;
refused without the session's CSRF token, and on a read-only server."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.conftest import pgrag_cmd
from tests.support.browser import tab
from tests.support.kb_server import (
    FULL_KEY,
    HASH_MODEL,
    HttpServer,
    KnowledgeBase,
    child_env,
)
from tests.test_console import BUDGET, csrf_of, sign_in

pytest_plugins = ("tests.support.kb_server", "tests.support.console")
pytestmark = pytest.mark.requires("chromium")

PATH = "plans/heron.md"
FIRST = "# Heron\n\nThe heron project ships from dock 7.\n"
SECOND = "# Heron\n\nThe heron project moved to dock 12 (osprey crane).\n"


def ingested_at(dsn: str) -> object:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT ingested_at FROM pgrag.documents WHERE path = %s", (PATH,))
        return row.fetchone()


def reingest(page: Page) -> None:
    """Click "Re-ingest" and wait until the page has followed the document to ready and
    loaded itself again (`?reingested=1`: only the status poll's end leads there)."""
    page.locator("#reingest").click()
    page.wait_for_url("**?reingested=1", timeout=60_000)
    expect(page.locator("#reingesting .state")).to_have_attribute("data-state", "ready")
    assert page.locator("#reingesting progress").get_attribute("value") == "100"


def test_reingest_from_the_document_page(
    browser: Browser, writable: HttpServer, tmp_path: Path
) -> None:
    source = tmp_path / "notes"
    (source / PATH).parent.mkdir(parents=True)
    (source / PATH).write_text(FIRST, encoding="utf-8")
    ingest = pgrag_cmd(
        "--database-url", writable.dsn, "--embedding-model", HASH_MODEL,
        "ingest", "-q", "-c", "notes", str(source),
    )  # fmt: skip
    subprocess.run(ingest, check=True, capture_output=True, timeout=300, env=child_env())
    before = ingested_at(writable.dsn)
    with tab(browser) as t:
        page = t.page
        page.goto(writable.base + "/console/documents?collection=notes")
        page.get_by_role("link", name=PATH).click()
        doc_url = page.url
        # without the session's token: refused, nothing queued
        refused = page.request.post(doc_url + "/reingest", form={"csrf": "forged"})
        assert refused.status == 403 and ingested_at(writable.dsn) == before
        reingest(page)  # the file unchanged: parsed again all the same
        after = ingested_at(writable.dsn)
        assert after is not None and before is not None and after > before
        (source / PATH).write_text(SECOND, encoding="utf-8")
        page.goto(doc_url)
        assert "dock 7" in page.locator("#text-h + details pre").inner_text()
        reingest(page)  # the page shows the new version's text and chunks, no reload needed
        assert "osprey crane" in page.locator("#text-h + details pre").inner_text()
        chunks = page.locator("#chunks").inner_text()
        assert "osprey crane" in chunks and "dock 7" not in chunks
        assert t.errors == []
    (source / PATH).unlink()  # gone from its folder: a clear error, the document kept
    with tab(browser) as t:
        t.page.goto(doc_url)
        t.page.locator("#reingest").click()
        assert t.page.locator("#error-code").inner_text() == "NOT_FOUND"
        assert len(t.errors) == 1 and "404" in t.errors[0]


def test_a_read_only_server_refuses_a_reingest(
    browser: Browser, kb_http: HttpServer, kb: KnowledgeBase
) -> None:
    before = kb.sql("SELECT ingested_at FROM pgrag.documents WHERE path = %s", (BUDGET,))
    with tab(browser) as t:
        sign_in(t, kb_http.base, FULL_KEY)
        doc = kb.id(BUDGET)
        t.page.goto(f"{kb_http.base}/console/documents/{doc}")
        assert t.page.locator("#reingest").count() == 0
        refused = t.page.request.post(
            f"{kb_http.base}/console/documents/{doc}/reingest", form={"csrf": csrf_of(t.page)}
        )
        assert refused.status == 403 and "read-only" in refused.text()
    assert kb.sql("SELECT ingested_at FROM pgrag.documents WHERE path = %s", (BUDGET,)) == before
