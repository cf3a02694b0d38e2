"""The original file in headless Chromium: the download from the document page (an ingested
folder's file and an upload's), the page preview beside a PDF's hit and on an image's page,
both scoped (a key limited to one collection cannot fetch another's file), sent as an
attachment never sniffed, and never a file outside the document's folder."""

from __future__ import annotations

import io
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import psycopg
import pytest
from PIL import Image
from playwright.sync_api import Browser, Page, expect
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

from tests.support.browser import tab
from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database
from tests.support.kb_server import HASH_MODEL, HttpServer, child_env, http_server

pytest_plugins = ("tests.support.console",)
pytestmark = pytest.mark.requires("chromium")

FULL, SCOPED = "originals-full", "originals-scoped"
PAGE_TWO = "The heron project ships from dock 7 next spring."
UPLOAD = "Scoped upload: the osprey survey starts at the north pier.\n"


@dataclass(frozen=True)
class Served:
    server: HttpServer
    folder: Path  # the ingested folder of collection `docs`

    def id(self, path: str) -> str:
        with psycopg.connect(self.server.dsn) as conn:
            row = conn.execute("SELECT id::text FROM pgrag.documents WHERE path = %s", (path,))
            found = row.fetchone()
        assert found is not None, path
        return str(found[0])


def two_page_pdf(path: Path) -> None:
    pdf = canvas.Canvas(str(path), pagesize=A4)
    pdf.drawString(72, 760, "Quarterly report, page one: nothing about birds.")
    pdf.showPage()
    pdf.drawString(72, 760, PAGE_TWO)
    pdf.showPage()
    pdf.save()


@pytest.fixture(scope="module")
def served(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("docs")
    two_page_pdf(folder / "report.pdf")
    Image.new("RGB", (640, 480), (200, 30, 30)).save(folder / "red.png")
    (folder / "notes.md").write_text("# Notes\n\nThe heron nests by the lake.\n")
    (folder.parent / "secret.txt").write_text("outside the folder\n")
    dsn = create_database(server_dsn)
    home = tmp_path_factory.mktemp("originals-home")
    env = {"PGRAG_READ_ONLY": "false", "PGRAG_TOOLSETS": "core,write", "PGRAG_HOME": str(home)}
    ingest = pgrag_cmd(
        "--database-url", dsn, "--embedding-model", HASH_MODEL, "ingest", "-q", "-c", "docs",
        str(folder),
    )  # fmt: skip
    try:
        # the PNG fails without an OCR engine: its file is still there to show
        subprocess.run(ingest, capture_output=True, timeout=600, env=child_env())
        keys = f"{FULL},{SCOPED}=other"
        with http_server(
            dsn, "--api-keys", keys, "--embedding-model", HASH_MODEL, env=env
        ) as server:
            yield Served(server, folder)
    finally:
        drop_database(server_dsn, dsn)


def sign_in(page: Page, base: str, key: str) -> None:
    page.goto(base + "/console/login")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base + "/")


def test_download_and_page_preview(browser: Browser, served: Served) -> None:
    base = served.server.base
    with tab(browser) as t:
        sign_in(t.page, base, FULL)
        query = {"q": "heron dock", "mode": "keyword", "collection": "docs"}
        t.page.goto(base + "/console/search?" + urlencode(query))
        hit = t.page.locator("li.hit", has=t.page.get_by_role("link", name="report.pdf"))
        picture = hit.locator("details.pagepic img")
        assert picture.get_attribute("src", timeout=5000) is not None
        # rendered when asked for: a page of results renders nothing until a page is opened
        assert picture.evaluate("img => img.complete && img.naturalWidth") == 0
        hit.locator("details.pagepic summary").click()
        assert str(picture.get_attribute("src")).endswith("preview?page=2")  # the hit's page
        expect(picture).to_have_js_property("complete", True, timeout=120_000)
        width = picture.evaluate("img => img.naturalWidth")
        assert 0 < width <= 1000
        png = t.page.request.get(base + str(picture.get_attribute("src")))
        assert png.headers["content-type"] == "image/png"
        assert png.headers["x-content-type-options"] == "nosniff"
        rendered = Image.open(io.BytesIO(png.body()))
        assert max(rendered.size) <= 1000 and rendered.size[1] > rendered.size[0]  # A4, upright
        # a page past the end, and a document without pages: clear refusals
        doc = served.id("report.pdf")
        assert t.page.request.get(f"{base}/console/documents/{doc}/preview?page=3").status == 400
        notes = served.id("notes.md")
        assert t.page.request.get(f"{base}/console/documents/{notes}/preview").status == 400

        hit.get_by_role("link", name="report.pdf").click()
        with t.page.expect_download() as download:
            t.page.locator("#download").click()
        assert download.value.suggested_filename == "report.pdf"
        saved = download.value.path()
        assert saved.read_bytes() == (served.folder / "report.pdf").read_bytes()
        sent = t.page.request.get(f"{base}/console/documents/{doc}/original")
        assert sent.headers["content-disposition"].startswith("attachment;")
        assert sent.headers["x-content-type-options"] == "nosniff"

        t.page.goto(f"{base}/console/documents/{served.id('red.png')}")
        image = t.page.locator("#page-preview")
        expect(image).to_have_js_property("complete", True, timeout=120_000)
        assert image.evaluate("img => [img.naturalWidth, img.naturalHeight]") == [640, 480]
        assert t.errors == []


def test_a_limited_key_fetches_only_its_own_files(browser: Browser, served: Served) -> None:
    base = served.server.base
    other_doc = served.id("report.pdf")
    with tab(browser) as t:
        sign_in(t.page, base, SCOPED)
        for tail in ("original", "preview?page=1"):
            assert t.page.request.get(f"{base}/console/documents/{other_doc}/{tail}").status == 404
        # its own upload lands in its collection and downloads as it was sent
        t.page.goto(base + "/console/upload")
        t.page.get_by_label("Files").set_input_files(
            files=[{"name": "osprey.txt", "mimeType": "text/plain", "buffer": UPLOAD.encode()}]
        )
        t.page.get_by_role("button", name="Upload").click()
        expect(t.page.locator("#uploaded .state")).to_have_attribute(
            "data-state", "ready", timeout=60_000
        )
        own = served.id("osprey.txt")
        got = t.page.request.get(f"{base}/console/documents/{own}/original")
        assert got.status == 200 and got.body() == UPLOAD.encode()
        assert "osprey.txt" in got.headers["content-disposition"]


def test_no_file_outside_the_documents_folder(browser: Browser, served: Served) -> None:
    """A stored path leading out of its folder, and a link to a file outside it, send
    nothing (the server opens paths component by component, links not followed)."""
    base = served.server.base
    doc = served.id("notes.md")
    link = served.folder / "linked.md"
    link.symlink_to(served.folder.parent / "secret.txt")
    with psycopg.connect(served.server.dsn, autocommit=True) as conn:
        try:
            with tab(browser) as t:
                sign_in(t.page, base, FULL)
                for path in (
                    "../secret.txt",
                    "linked.md",
                    str(served.folder.parent / "secret.txt"),
                ):
                    conn.execute("UPDATE pgrag.documents SET path = %s WHERE id = %s", (path, doc))
                    got = t.page.request.get(f"{base}/console/documents/{doc}/original")
                    assert got.status == 404 and b"outside the folder" not in got.body(), path
                    t.page.goto(f"{base}/console/documents/{doc}")
                    assert t.page.locator("#download").count() == 0, path
                    assert t.page.locator("#original-gone").count() == 1, path
        finally:
            conn.execute("UPDATE pgrag.documents SET path = 'notes.md' WHERE id = %s", (doc,))
            link.unlink()


def test_a_preview_of_a_file_gone_says_so(browser: Browser, served: Served) -> None:
    """#42: a page preview of a file removed since ingestion was a broken picture; it is a
    picture saying the file is gone (its code in a header, no load error in the page)."""
    base = served.server.base
    pdf = served.folder / "report.pdf"
    moved = pdf.with_name("report.pdf.moved")
    pdf.rename(moved)
    try:
        with tab(browser) as t:
            sign_in(t.page, base, FULL)
            query = {"q": "heron dock", "mode": "keyword", "collection": "docs"}
            t.page.goto(base + "/console/search?" + urlencode(query))
            hit = t.page.locator("li.hit", has=t.page.get_by_role("link", name="report.pdf"))
            hit.locator("details.pagepic summary").click()
            picture = hit.locator("details.pagepic img")
            expect(picture).to_have_js_property("complete", True, timeout=30_000)
            assert picture.evaluate("img => img.naturalWidth") > 0  # shown, not broken
            sent = t.page.request.get(base + str(picture.get_attribute("src")))
            assert sent.headers["x-pgrag-error"] == "NOT_FOUND"
            assert sent.headers["cache-control"] == "no-store"
            assert sent.headers["content-type"].startswith("image/svg+xml")
            assert "The file is gone" in sent.text()
            assert "<script" not in sent.text()
            t.page.goto(f"{base}/console/documents/{served.id('report.pdf')}")
            assert t.page.locator("#original-gone").count() == 1
            assert t.page.locator("#page-preview").count() == 0
            # the download still answers the error page with its stable code
            got = t.page.request.get(f"{base}/console/documents/{served.id('report.pdf')}/original")
            assert got.status == 404 and "NOT_FOUND" in got.text()
            assert t.errors == []
    finally:
        moved.rename(pdf)
