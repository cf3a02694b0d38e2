"""OCR: scanned PDF pages and image files become searchable pages. Fixtures are text the
tests render themselves (Pillow, a CJK font from fonts-wqy-zenhei), read by the real engine
and stored in a real PostgreSQL; hash/384 embeddings keep ingestion fast."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import io
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from PIL import Image, ImageDraw, ImageFont
from psycopg_pool import AsyncConnectionPool

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.errors import ErrorCode
from pgrag.ingest.ocr import OcrOptions, engines
from pgrag.ingest.parse_worker import close_workers
from pgrag.ingest.parsers import parse
from pgrag.ingest.pipeline import Ingestor, Outcome
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.services.status import status_report
from pgrag.settings import load_settings
from tests.support.databases import create_database, drop_database
from tests.support.search import _pool

pytestmark = [pytest.mark.anyio, pytest.mark.requires("tesseract")]

FONT_PATHS = [
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
]
FONT = next((p for p in FONT_PATHS if Path(p).exists()), None)
NO_FONT = (
    "the OCR tests render Chinese with a CJK font: apt install fonts-wqy-zenhei (.ci/run does)"
)


def needs_font(test: Any) -> Any:
    """Fails (never skips) without the font: the fixtures cannot be made without it."""

    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if FONT is None:
            pytest.fail(NO_FONT)
        return test(*args, **kwargs)

    return wrapper


HASH = "hash/384"

EN = "The warranty on the hydraulic pump expires on 30 June 2027."
ZH = "本合同自双方签字之日起生效，乙方应在十五个工作日内支付全部货款。"
MIXED = "Screenshot: 服务器 gateway-7 的磁盘使用率达到百分之九十二。"
TIFF_2 = "Frame two records the delivery of 480 steel brackets."
ROTATED = "The sideways scan mentions the Lisbon warehouse inventory."
LOWRES = "Low resolution receipt total amount 73 euros."
PDF_SCAN = "The scanned annex lists the penalty of 5000 yuan per day."
PDF_IMAGE_ONLY = "Appendix B sets the monthly rent at 8200 yuan."
PDF_TEXT = "The typed cover page introduces the maintenance agreement."


def render(lines: list[str], *, size: int = 42, width: int = 2480, dpi: int = 300) -> Image.Image:
    """Black text on white, one line each, as a 300 dpi scan of it would look."""
    assert FONT is not None
    font = ImageFont.truetype(FONT, size)
    image = Image.new("RGB", (width, 150 + len(lines) * size * 3), "white")
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((size * 3, 100 + i * size * 3), line, fill="black", font=font)
    image.info["dpi"] = (dpi, dpi)
    return image


def mixed_pdf(path: Path) -> None:
    """Page 1 typed, page 2 a scanned image only, page 3 typed."""
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), pagesize=A4)
    pdf.drawString(72, 760, PDF_TEXT + " It has a readable text layer, long enough.")
    pdf.showPage()
    scan = io.BytesIO()
    render([PDF_SCAN]).save(scan, format="PNG")
    pdf.drawImage(ImageReader(scan), 0, 500, width=A4[0], height=A4[0] * 0.12)
    pdf.showPage()
    pdf.drawString(72, 760, "Closing page with signatures of both parties, typed as text.")
    pdf.showPage()
    pdf.save()


def build_folder(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    render([EN]).save(root / "scan_en.png", dpi=(300, 300))
    render([ZH]).save(root / "contract_zh.jpg", quality=92, dpi=(300, 300))
    render([MIXED]).save(root / "screenshot.webp", lossless=True)
    frames = [render(["Frame one is the cover sheet of the delivery note."]), render([TIFF_2])]
    frames[0].save(root / "delivery.tiff", save_all=True, append_images=frames[1:])
    render([ROTATED]).rotate(90, expand=True).save(root / "sideways.png")
    render([LOWRES], size=16, width=900, dpi=100).save(root / "receipt.bmp")
    render([PDF_IMAGE_ONLY]).save(root / "image_only.pdf", resolution=300)  # Pillow: image-only PDF
    mixed_pdf(root / "mixed.pdf")
    return root


@pytest.fixture(scope="module")
def ocr_options(tmp_path_factory: pytest.TempPathFactory) -> OcrOptions:
    return OcrOptions(workers=2, cache_dir=tmp_path_factory.mktemp("ocr-cache"))


@pytest.fixture(scope="module")
def corpus(
    server_dsn: str,
    template_dsn: str,
    tmp_path_factory: pytest.TempPathFactory,
    ocr_options: OcrOptions,
) -> Iterator[tuple[str, Path]]:
    if FONT is None:
        pytest.fail(NO_FONT)
    url = create_database(server_dsn)
    folder = build_folder(tmp_path_factory.mktemp("scans") / "scans")

    async def ingest() -> None:
        async with open_database(load_settings(), dsn=url, max_size=2) as db:
            ingestor = Ingestor(db.pool, HashEmbedder(HASH), collection="scans", ocr=ocr_options)
            summary = await ingestor.run([folder])
            assert not summary.failures, summary.failures

    asyncio.run(ingest())
    yield url, folder
    drop_database(server_dsn, url)


@pytest.fixture
async def pool(corpus: tuple[str, Path]) -> AsyncIterator[AsyncConnectionPool]:
    p = await _pool(corpus[0])
    yield p
    await p.close()


def cer(truth: str, read: str) -> float:
    """Character error rate: edit distance over the truth's length, spaces ignored."""
    a = "".join(truth.split())
    b = "".join(read.split())
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1] / max(1, len(a))


PLANTED = [
    ("hydraulic pump warranty", "scan_en.png", 1),
    ("乙方 支付 货款", "contract_zh.jpg", 1),
    ("gateway-7 磁盘使用率", "screenshot.webp", 1),
    ("steel brackets delivery", "delivery.tiff", 2),
    ("Lisbon warehouse inventory", "sideways.png", 1),
    ("receipt total euros", "receipt.bmp", 1),
    ("penalty yuan per day", "mixed.pdf", 2),
    ("monthly rent appendix", "image_only.pdf", 1),
]


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize(("query", "path", "page"), PLANTED)
async def test_planted_sentence_found_at_its_page(
    pool: AsyncConnectionPool, mode: str, query: str, path: str, page: int
) -> None:
    service = SearchService(pool, HashEmbedder(HASH))
    found = await service.search(
        SearchRequest(query=query, mode=mode, limit=3, filters={"collection": "scans"})
    )
    top = found.data.results[0]
    assert (top.path, top.location.page) == (path, page), [
        (h.path, h.location.page) for h in found.data.results
    ]


def _rows(dsn: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, args).fetchall()


def test_pages_marked_as_ocr_with_confidence_and_dimensions(corpus: tuple[str, Path]) -> None:
    dsn, _ = corpus
    rows = _rows(
        dsn,
        "SELECT d.path, u.number, u.meta FROM pgrag.units u JOIN pgrag.documents d"
        " ON d.id = u.document_id WHERE d.path IN ('mixed.pdf', 'delivery.tiff')"
        " ORDER BY 1, 2",
    )
    meta = {(p, n): m for p, n, m in rows}
    assert [n for (p, n) in meta if p == "mixed.pdf" and meta[(p, n)].get("ocr")] == [2]
    for number in (1, 2):
        tiff = meta[("delivery.tiff", number)]
        assert tiff["ocr"] is True and tiff["ocr_confidence"] > 0.8
        assert (tiff["width"], tiff["height"]) == (2480, 276)
    [(outline, metadata, status)] = _rows(
        dsn, "SELECT outline, metadata, status FROM pgrag.documents WHERE path = 'mixed.pdf'"
    )
    assert status == "ready"
    assert outline["ocr"]["pages"] == [2] and metadata["ocr"]["engine"] in ("rapidocr", "tesseract")
    [(outline,)] = _rows(dsn, "SELECT outline FROM pgrag.documents WHERE path = 'delivery.tiff'")
    assert outline["total_pages"] == 2
    assert outline["pages"][1]["width"] == 2480
    [(meta_rot,)] = _rows(
        dsn,
        "SELECT u.meta FROM pgrag.units u JOIN pgrag.documents d ON d.id = u.document_id"
        " WHERE d.path = 'sideways.png'",
    )
    assert meta_rot["ocr_rotated"] in (90, 270)


@needs_font
@pytest.mark.parametrize("truth", [EN, ZH, MIXED])
def test_character_error_rate_on_clean_300dpi(
    truth: str, tmp_path: Path, ocr_options: OcrOptions
) -> None:
    path = tmp_path / "clean.png"
    render([truth]).save(path, dpi=(300, 300))
    doc = parse(path, ocr=ocr_options)
    assert cer(truth, doc.units[0].body) < 0.05, doc.units[0].body


PARAGRAPH = [
    "This agreement is made between the supplier and the buyer named below.",
    "The supplier delivers 480 steel brackets to the Lisbon warehouse each month.",
    "本协议由供需双方于上海签订，自双方签字之日起生效。",
    "甲方有权在提前三十日书面通知的情况下解除本协议。",
    "Invoices are payable within 30 days; 逾期付款按日万分之五计息。",
    "Both parties keep one signed copy 双方各执一份 of this agreement.",
]


@needs_font
@pytest.mark.parametrize("suffix", [".png", ".pdf"])
def test_character_error_rate_on_a_multi_line_300dpi_page(
    suffix: str, tmp_path: Path, ocr_options: OcrOptions
) -> None:
    """A paragraph of English, Chinese and mixed lines, as an image and as a scanned PDF:
    every line read, in order (edit distance counts dropped and swapped lines)."""
    path = tmp_path / f"paragraph{suffix}"
    render(PARAGRAPH).save(path, dpi=(300, 300), resolution=300)
    doc = parse(path, ocr=ocr_options)
    assert doc.units[0].meta["ocr"] is True
    assert cer("\n".join(PARAGRAPH), doc.units[0].body) < 0.05, doc.units[0].body


@needs_font
def test_unchanged_pages_are_read_from_the_cache(tmp_path: Path, ocr_options: OcrOptions) -> None:
    from pgrag.ingest.ocr import ocr_images

    image = render([EN])
    first, _ = ocr_images([1], [lambda: image], ocr_options)
    seen: list[tuple[int, int]] = []
    again = OcrOptions(cache_dir=ocr_options.cache_dir, progress=lambda d, t: seen.append((d, t)))
    second, _ = ocr_images([1], [lambda: image], again)
    assert second[0].cached and second[0].text == first[0].text
    assert seen == [(1, 1)]


@needs_font
def test_a_page_that_fails_ocr_is_reported_and_the_document_ingests(tmp_path: Path) -> None:
    path = tmp_path / "slow.png"
    render(["A page that runs out of time."], size=30, width=1200).save(path)
    doc = parse(path, ocr=OcrOptions(page_timeout_s=0.001))  # cannot finish in a millisecond
    assert doc.units[0].body == "" and "longer than" in doc.units[0].meta["ocr_error"]
    assert doc.metadata["ocr"]["failed_pages"][0]["page"] == 1
    assert "OCR failed" in doc.metadata["warnings"][0]


@needs_font
def test_rapidocr_page_over_its_time_limit_is_killed_and_the_next_page_is_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RapidOCR reads in a worker process: a page over its limit kills the worker (no
    thread left computing), the next page starts a fresh one."""
    from pgrag.ingest.ocr import ocr_images, rapid

    started: list[rapid.Worker] = []
    start = rapid.Worker.__init__

    def tracked(worker: rapid.Worker, threads: int) -> None:
        start(worker, threads)
        started.append(worker)

    monkeypatch.setattr(rapid.Worker, "__init__", tracked)
    engines._rapid.cache_clear()
    options = OcrOptions(engine="rapidocr", workers=1, page_timeout_s=0.05)
    try:
        slow, engine = ocr_images([1], [lambda: render([EN] * 8)], options)
        assert engine == "rapidocr" and "longer than 0.05 s" in (slow[0].error or "")
        assert len(started) == 1 and started[0].proc.poll() is not None  # killed
        unhurried = dataclasses.replace(options, page_timeout_s=300)  # the same engine
        again, _ = ocr_images([1], [lambda: render([EN])], unhurried)
        assert len(started) == 2 and cer(EN, again[0].text) < 0.05, again[0].text
    finally:
        for worker in started:
            worker.close()
        engines._rapid.cache_clear()


async def test_missing_engine_fails_with_ocr_unavailable(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # parsing (and OCR) runs in a worker process: it must not find either engine
    stub = tmp_path / "stub" / "rapidocr_onnxruntime"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('not installed')\n")
    monkeypatch.setenv("PYTHONPATH", f"{stub.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no tesseract binary
    close_workers()  # a worker started before now has the engines
    folder = tmp_path / "in"
    folder.mkdir()
    Image.new("RGB", (200, 100), "white").save(folder / "photo.png")
    Image.new("RGB", (200, 100), "white").save(folder / "scan.pdf")
    try:
        async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
            summary = await Ingestor(db.pool, HashEmbedder(HASH)).run([folder])
    finally:
        close_workers()
    assert {r.path: (r.outcome, r.error_code) for r in summary.results} == {
        "photo.png": (Outcome.FAILED, ErrorCode.OCR_UNAVAILABLE),
        "scan.pdf": (Outcome.FAILED, ErrorCode.OCR_UNAVAILABLE),
    }
    message = summary.results[0].error or ""
    assert "pip install rapidocr-onnxruntime" in message and "tesseract-ocr" in message
    rows = _rows(dsn, "SELECT status, error_code FROM pgrag.documents ORDER BY path")
    assert rows == [("failed", ErrorCode.OCR_UNAVAILABLE), ("failed", ErrorCode.OCR_UNAVAILABLE)]
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        report = await status_report(conn)
    assert report["ocr"]["unavailable"] == 2 and report["ocr"]["documents"] == 0
    assert {f["error_code"] for f in report["failed"]} == {ErrorCode.OCR_UNAVAILABLE}
    assert all("pip install rapidocr-onnxruntime" in f["error_detail"] for f in report["failed"])
