"""The documents pages on a server of their own, in headless Chromium: the listing filtered
by language (derived from the chunks': the majority, else "mixed"), and each chunk's OCR
confidence on its document's page, from OCR fixtures the tests render (tests/test_ocr.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from urllib.parse import urlencode

import psycopg
import pytest
from playwright.sync_api import Browser

from tests.conftest import pgrag_cmd
from tests.support.browser import tab
from tests.support.kb_server import HASH_MODEL, HttpServer, child_env, writable_http_server
from tests.test_ocr import EN, FONT, NO_FONT, mixed_pdf, render

pytest_plugins = ("tests.support.console",)
pytestmark = [pytest.mark.requires("chromium"), pytest.mark.requires("tesseract")]

NOTES = {
    "en_note.md": "# Shipping\n\nThe heron project ships from dock 7 next spring.\n",
    "zh_note.md": "# 发货\n\n苍鹭项目明年春天从七号码头发货，货物包括钢制支架。\n",
    # one English and one Chinese section: two chunks, no majority
    "both.md": "# Shipping\n\nThe heron project ships from dock 7 next spring.\n\n"
    "# 发货\n\n苍鹭项目明年春天从七号码头发货，货物包括钢制支架。\n",
}


@pytest.fixture(scope="module")
def server(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpServer]:
    if FONT is None:
        pytest.fail(NO_FONT)
    source = tmp_path_factory.mktemp("docs")
    for name, text in NOTES.items():
        (source / name).write_text(text, encoding="utf-8")
    render([EN]).save(source / "scan_en.png", dpi=(300, 300))
    mixed_pdf(source / "mixed.pdf")  # page 2 a scan, pages 1 and 3 typed
    with writable_http_server(server_dsn, tmp_path_factory.mktemp("pgrag-home")) as srv:
        ingest = pgrag_cmd(
            "--database-url", srv.dsn, "--embedding-model", HASH_MODEL,
            "ingest", "-q", "-c", "docs", str(source),
        )  # fmt: skip
        subprocess.run(ingest, check=True, capture_output=True, timeout=600, env=child_env())
        yield srv


def test_the_listing_filters_by_the_language_of_the_chunks(
    browser: Browser, server: HttpServer
) -> None:
    with tab(browser) as t:

        def listed(language: str) -> dict[str, str]:
            query = {"collection": "docs", "language": language}
            t.page.goto(server.base + "/console/documents?" + urlencode(query))
            rows = t.page.locator("#documents tbody tr[data-document-id]")
            paths = rows.locator("td:first-child").all_inner_texts()
            return dict(zip(paths, rows.locator("td.lang").all_inner_texts(), strict=True))

        everything = listed("")
        assert everything["zh_note.md"] == "zh" and everything["both.md"] == "mixed"
        assert everything["en_note.md"] == everything["scan_en.png"] == "en"
        assert listed("zh") == {"zh_note.md": "zh"}
        assert listed("mixed") == {"both.md": "mixed"}
        english = listed("EN")
        assert {"en_note.md", "scan_en.png", "mixed.pdf"} <= set(english)
        assert set(english.values()) == {"en"}
        assert listed("fr") == {}
        assert t.page.get_by_label("Language").input_value() == "fr"
        assert t.errors == []


def test_each_chunk_read_by_ocr_shows_its_confidence(browser: Browser, server: HttpServer) -> None:
    with psycopg.connect(server.dsn) as conn:
        pages = dict(
            conn.execute(
                "SELECT u.number, (u.meta ->> 'ocr_confidence')::float8 FROM pgrag.units u"
                " JOIN pgrag.documents d ON d.id = u.document_id WHERE d.path = 'mixed.pdf'"
            ).fetchall()
        )
    assert pages[1] is None and pages[3] is None and pages[2] > 0.5  # page 2 alone is a scan
    with tab(browser) as t:
        t.page.goto(server.base + "/console/documents?collection=docs")
        t.page.get_by_role("link", name="mixed.pdf").click()
        rows = t.page.locator("#chunks tbody tr")
        shown = {
            loc: ocr
            for loc, ocr in zip(
                rows.locator("td:nth-child(3)").all_inner_texts(),
                rows.locator("td.ocr").all_inner_texts(),
                strict=True,
            )
        }
        assert shown == {"p. 1": "", "p. 2": f"{pages[2]:.2f}", "p. 3": ""}
        assert t.page.get_by_role("columnheader", name="OCR confidence").count() == 1
        assert t.errors == []
