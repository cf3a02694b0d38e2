"""Rough edges of the console's first round, in headless Chromium on a server of their own:
highlighting marks whole words ("EU" never inside "EUR"; Chinese, written without spaces,
anywhere), "Why not?" for a document already shown says where, the document page shows the
file's own modified date beside the one inside the file, and the file-type filter offers
the types of the caller's documents."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from urllib.parse import urlencode

import docx
import psycopg
import pytest
from playwright.sync_api import Browser

from tests.support.axe import serious_violations
from tests.support.browser import tab
from tests.support.commands import pgrag_cmd
from tests.support.kb_server import HASH_MODEL, HttpServer, child_env

pytest_plugins = ("tests.support.console",)
pytestmark = pytest.mark.requires("chromium")

NOTES = {
    "fees.md": "# Fees\n\nThe EU levy is paid in EUR; the EU rules apply to every member.\n",
    "zh_note.md": "# 发货\n\n苍鹭项目明年春天从七号码头发货，码头工人负责装货。\n",
}
FILE_DATE = datetime(2024, 5, 6, 12, 0)


@pytest.fixture(scope="module")
def server(writable: HttpServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    folder: Path = tmp_path_factory.mktemp("edges")
    for name, text in NOTES.items():
        (folder / name).write_text(text, encoding="utf-8")
    report = docx.Document()  # python-docx's template says it was modified in 2013
    report.add_paragraph("The harbour report lists every crane.")
    report.save(str(folder / "harbour.docx"))
    stamp = FILE_DATE.timestamp()
    os.utime(folder / "harbour.docx", (stamp, stamp))
    cmd = pgrag_cmd("--database-url", writable.dsn, "--embedding-model", HASH_MODEL, "ingest")
    done = subprocess.run(
        [*cmd, "-q", "-c", "edges", str(folder)], capture_output=True, timeout=300, env=child_env()
    )
    assert done.returncode == 0, done.stderr
    yield writable


def test_highlighting_marks_whole_words_and_chinese_anywhere(
    browser: Browser, server: HttpServer
) -> None:
    with tab(browser) as t:
        page = t.page
        page.goto(server.base + "/console/search?" + urlencode({"q": "EU", "mode": "keyword"}))
        marks = page.locator("li.hit .snippet mark").all_inner_texts()
        assert marks and {m.lower() for m in marks} == {"eu"}  # never the EU of EUR
        assert "EUR" in page.locator("li.hit .snippet").first.inner_text()
        page.goto(server.base + "/console/search?" + urlencode({"q": "码头", "mode": "keyword"}))
        marks = page.locator("li.hit .snippet mark").all_inner_texts()
        assert marks and set(marks) == {"码头"}
        assert t.errors == []


def test_why_not_for_a_document_shown_says_where(browser: Browser, server: HttpServer) -> None:
    with tab(browser) as t:
        query = {"q": "EU levy", "mode": "keyword", "why_not": "fees.md"}
        t.page.goto(server.base + "/console/search?" + urlencode(query))
        shown = t.page.locator("#why-shown")
        assert shown.get_attribute("data-rank") == "1"
        assert shown.inner_text().startswith("It is result #1.")
        assert t.page.locator("#why-legs").count() == 0  # no table of blank scores
        assert t.page.locator("#why-reasons").count() == 0
        assert t.errors == []


def test_the_document_page_shows_the_files_own_date(browser: Browser, server: HttpServer) -> None:
    with psycopg.connect(server.dsn) as conn:
        row = conn.execute("SELECT id::text FROM pgrag.documents WHERE path = 'harbour.docx'")
        found = row.fetchone()
    assert found is not None
    with tab(browser) as t:
        t.page.goto(f"{server.base}/console/documents/{found[0]}")
        terms = t.page.locator("#metadata dt").all_inner_texts()
        values = t.page.locator("#metadata dd").all_inner_texts()
        meta = dict(zip(terms, values, strict=True))
        assert "2024-05-06" in meta["modified"]
        assert meta["modified_inside_file"].startswith("2013-12-23")
        assert t.errors == []


def test_the_file_type_filter_offers_the_callers_types(
    browser: Browser, server: HttpServer
) -> None:
    with tab(browser) as t:
        t.page.goto(server.base + "/console/search")
        offered = t.page.locator("#file_type option").all_text_contents()
        assert offered[1:] == ["docx", "md"]
        t.page.goto(server.base + "/console/documents")
        t.page.locator("#file_type").select_option("docx")
        t.page.locator("#file_type").evaluate("s => s.form.requestSubmit()")
        t.page.wait_for_url("**file_type=docx**")
        listed = t.page.locator("#documents tbody td:first-child").all_inner_texts()
        assert listed == ["harbour.docx"]
        assert t.errors == []


@pytest.mark.requires("tests/js")
def test_axe_core_on_the_writable_servers_pages(browser: Browser, server: HttpServer) -> None:
    """The pages a read-only server does not show (upload, an evaluation's before/after),
    and the others once more, at both widths and in both languages."""
    pages = [
        "/",
        "/console/upload",
        "/console/search?" + urlencode({"q": "EU", "mode": "keyword", "why_not": "fees.md"}),
        "/console/documents?file_type=docx",
        "/console/documents/harbour.docx",
        "/console/searches",
    ]
    cases = '{"query": "EU levy", "document": "fees.md", "category": "fees"}'
    for width, lang in ((1280, "en"), (390, "zh")):
        with tab(browser, width=width, bypass_csp=True) as t:
            t.page.context.add_cookies([{"name": "pgrag_lang", "value": lang, "url": server.base}])
            for path in pages:
                t.page.goto(server.base + path)
                assert serious_violations(t.page) == [], (width, path)
            t.page.goto(server.base + "/console/eval")
            t.page.locator("#queries").fill(cases)
            t.page.locator("#compare-knobs summary").click()
            t.page.locator("#after_fusion").select_option("rrf")
            t.page.locator("button[type=submit]").last.click()
            t.page.wait_for_selector("#compare")
            assert serious_violations(t.page) == [], (width, "/console/eval (compared)")
