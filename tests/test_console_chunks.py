"""The console's chunk actions in headless Chromium, on a writable server of its own: a
chunk's Disable button (CSRF-protected) takes it out of REST and SQL search in every mode,
the document page marks it, "Why not?" names it, Enable puts it back; the audit rows name the chunk; a
read-only server shows no button (its route refuses as Delete's does: require_remote_writes)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import psycopg
import pytest
from playwright.sync_api import Browser, Page, expect

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.settings import load_settings
from tests.support.browser import tab
from tests.support.databases import create_database, drop_database
from tests.support.kb_server import HASH_MODEL, HttpServer, http_server

pytest_plugins = ("tests.support.console",)
pytestmark = pytest.mark.requires("chromium")

COLLECTION = "chunkdemo"
HERON = "# Heron\n\nThe grey heron stalks frogs in the shallow Okavango marsh at dawn."
MODES = ("hybrid", "semantic", "keyword", "exact", "regex")


def sql(dsn: str, statement: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(statement, params).fetchall()


def ingest(dsn: str, folder: Path) -> int:
    (folder / "heron.md").write_text(HERON, encoding="utf-8")

    async def run() -> None:
        async with open_database(load_settings(embedding_model=HASH_MODEL), dsn=dsn) as db:
            await Ingestor(db.pool, HashEmbedder(HASH_MODEL), collection=COLLECTION).run([folder])

    # in a thread of its own: Playwright's sync API runs an event loop in this one
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, run()).result()
    (chunk,) = sql(
        dsn,
        "SELECT c.id FROM pgrag.chunks c JOIN pgrag.collections col ON col.id = c.collection_id"
        " WHERE col.name = %s",
        (COLLECTION,),
    )[0]
    return int(chunk)


def found_in(page: Page, server: HttpServer, chunk: int) -> dict[str, bool]:
    """Whether each mode's REST search returns the chunk."""
    found = {}
    for mode in MODES:
        q = "heron" if mode == "regex" else "heron Okavango"
        r = page.request.get(
            server.base + "/api/search",
            params={"q": q, "mode": mode, "collection": COLLECTION, "limit": 20},
        )
        assert r.status == 200, r.text()
        found[mode] = chunk in [hit["chunk_id"] for hit in r.json()["results"]]
    return found


def test_disable_then_enable_a_chunk(
    browser: Browser, writable: HttpServer, tmp_path: Path
) -> None:
    chunk = ingest(writable.dsn, tmp_path)
    with tab(browser) as t:
        page = t.page
        assert found_in(page, writable, chunk) == dict.fromkeys(MODES, True)
        page.goto(writable.base + f"/console/documents?collection={COLLECTION}")
        page.get_by_role("link", name="heron.md").click()
        doc_url = page.url
        row = page.locator(f"#chunk-{chunk}")
        csrf = str(page.get_attribute("input[name=csrf]", "value"))
        disable = f"{writable.base}/console/chunks/{chunk}/disable"
        # refused without the session's token or from another origin: still enabled
        assert page.request.post(disable, form={"csrf": "forged"}).status == 403
        foreign = page.request.post(
            disable, form={"csrf": csrf}, headers={"Origin": "http://evil.example"}
        )
        assert foreign.status == 403
        assert found_in(page, writable, chunk) == dict.fromkeys(MODES, True)

        row.get_by_role("button", name="Disable").click()
        page.wait_for_url(doc_url + f"#chunk-{chunk}")
        expect(row).to_have_attribute("data-disabled", "1")
        expect(row.get_by_role("button")).to_have_text("Enable")
        assert found_in(page, writable, chunk) == dict.fromkeys(MODES, False)
        assert sql(writable.dsn, "SELECT chunk_id FROM pgrag.regex_search('heron')") == []
        # "Why not?" says so
        why = {"q": "heron Okavango", "collection": COLLECTION, "why_not": "heron.md"}
        page.goto(writable.base + "/console/search?" + urlencode(why))
        reasons = page.locator("#why-reasons li")
        expect(reasons.first).to_have_attribute("data-reason", "why_disabled")
        assert reasons.first.inner_text().endswith(" 1")
        page.goto(doc_url)

        row.get_by_role("button", name="Enable").click()
        expect(row.get_by_role("button")).to_have_text("Disable")
        assert row.get_attribute("data-disabled") is None
        assert found_in(page, writable, chunk) == dict.fromkeys(MODES, True)
        assert t.errors == []
    audited = sql(
        writable.dsn,
        "SELECT tool, arguments ->> 'chunk_id', outcome FROM pgrag.audit_log"
        " WHERE tool LIKE 'POST /console/chunks/%%' ORDER BY id",
    )
    assert [(tool, c) for tool, c, _ in audited][-2:] == [
        ("POST /console/chunks/{chunk_id}/{action}", str(chunk)),
    ] * 2
    assert [
        a
        for (a,) in sql(
            writable.dsn,
            "SELECT arguments ->> 'action' FROM pgrag.audit_log"
            " WHERE tool LIKE 'POST /console/chunks/%%' AND outcome = 'SUCCESS' ORDER BY id",
        )
    ] == ["disable", "enable"]


def test_no_button_on_a_read_only_server(
    browser: Browser, server_dsn: str, template_dsn: str, tmp_path: Path
) -> None:
    dsn = create_database(server_dsn)
    try:
        chunk = ingest(dsn, tmp_path)
        env = {"PGRAG_READ_ONLY": "true", "PGRAG_HOME": str(tmp_path / "home")}
        with (
            http_server(dsn, "--embedding-model", HASH_MODEL, env=env) as server,
            tab(browser) as t,
        ):
            t.page.goto(server.base + f"/console/documents?collection={COLLECTION}")
            t.page.get_by_role("link", name="heron.md").click()
            expect(t.page.locator(f"#chunk-{chunk}")).to_be_visible()
            assert t.page.locator("button.chunk-toggle").count() == 0
        assert sql(dsn, "SELECT disabled_at FROM pgrag.chunks WHERE id = %s", (chunk,)) == [(None,)]
    finally:
        drop_database(server_dsn, dsn)
