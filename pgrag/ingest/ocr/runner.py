"""Run OCR over a document's pages: a few pages at a time, cached, with a time limit each.

Pages are rendered lazily inside the workers, so at most `workers` page bitmaps are in
memory at once. A page that fails or times out becomes an empty page with its error; the
document still ingests. The engines enforce the time limit themselves, by killing the
process that reads the page. A document has a page cap and a time budget too (a 300 KB PDF
can hold a thousand blank scanned pages): pages past either are left empty, named as such.
"""

from __future__ import annotations

import dataclasses
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from PIL import Image

from . import cache, engines
from .engines import Engine, Line

if TYPE_CHECKING:
    from pgrag.config.ingest import IngestSettings

Render = Callable[[], Image.Image]
Progress = Callable[[int, int], None]  # (pages done, pages total)


@dataclass(frozen=True)
class OcrOptions:
    engine: str = "auto"  # auto | rapidocr | tesseract | off
    languages: str = "chi_sim+eng"
    workers: int = 2
    page_timeout_s: float = 120.0
    max_pages: int = 200  # pages OCR'd per document
    document_timeout_s: float = 900.0  # OCR time per document
    cache_dir: Path | None = None
    progress: Progress | None = field(default=None, compare=False)

    @classmethod
    def from_settings(cls, settings: IngestSettings) -> OcrOptions:
        return cls(
            engine=settings.ocr_engine,
            languages=settings.ocr_languages,
            workers=settings.ocr_workers,
            page_timeout_s=settings.ocr_page_timeout_s,
            max_pages=settings.ocr_max_pages,
            document_timeout_s=settings.ocr_document_timeout_s,
            cache_dir=settings.home / "ocr-cache",
        )


@dataclass
class OcrPage:
    number: int
    text: str = ""
    confidence: float = 0.0
    rotated: int = 0  # degrees the page was turned before reading
    cached: bool = False
    error: str | None = None


def ocr_images(
    numbers: Sequence[int], renders: Sequence[Render], options: OcrOptions
) -> tuple[list[OcrPage], str]:
    """OCR each rendered page; returns the pages in order and the engine's name. Raises
    OcrUnavailable before any work when no engine fits."""
    engine = engines.load(options.engine, options.languages, options.workers)
    total = len(renders)
    done = 0
    lock = threading.Lock()
    deadline = time.monotonic() + options.document_timeout_s

    def one(index: int, number: int, render: Render) -> OcrPage:
        nonlocal done
        left = deadline - time.monotonic()
        try:
            if index >= options.max_pages:
                page = OcrPage(
                    number,
                    error=f"not read: past {options.max_pages} pages "
                    "per document (PGRAG_OCR_MAX_PAGES)",
                )
            elif left <= 0:
                page = OcrPage(
                    number,
                    error="not read: the document's OCR time ran out "
                    "(PGRAG_OCR_DOCUMENT_TIMEOUT_S)",
                )
            else:
                within = dataclasses.replace(
                    options, page_timeout_s=min(options.page_timeout_s, left)
                )
                page = _page(number, render, engine, within)
        except Exception as exc:  # a broken frame or engine error: this page only
            page = OcrPage(number, error=f"{type(exc).__name__}: {exc}")
        with lock:
            done += 1
            if options.progress:
                options.progress(done, total)
        return page

    with ThreadPoolExecutor(max_workers=max(1, options.workers)) as pool:
        pages = list(pool.map(one, range(total), numbers, renders))
    return pages, engine.name


def _page(number: int, render: Render, engine: Engine, options: OcrOptions) -> OcrPage:
    image = render()
    name = cache.key(image, engine.name, options.languages)
    hit = cache.get(options.cache_dir, name)
    if hit is not None:
        return OcrPage(number, hit["text"], hit["confidence"], hit.get("rotated", 0), cached=True)
    lines = engine.read(image, options.page_timeout_s)
    rotated = 0
    if _looks_sideways(lines) or _doubtful(lines) or (not lines and _has_ink(image)):
        for angle in (90, 270):
            turned = engine.read(image.rotate(angle, expand=True), options.page_timeout_s)
            if _score(turned) > _score(lines):
                lines, rotated = turned, angle
    text = reading_order(lines)
    confidence = _confidence(lines)
    cache.put(options.cache_dir, name, {"text": text, "confidence": confidence, "rotated": rotated})
    return OcrPage(number, text, confidence, rotated)


DOUBTFUL_CONFIDENCE = 0.6  # mean line confidence under which turned readings are tried


def _looks_sideways(lines: list[Line]) -> bool:
    """Most text boxes taller than wide: the page was scanned turned by 90 degrees."""
    boxes = [ln.box for ln in lines if len(ln.text) >= 2]
    tall = sum(1 for x0, y0, x1, y1 in boxes if (y1 - y0) > 1.5 * (x1 - x0))
    return len(boxes) >= 2 and tall > len(boxes) / 2


def _doubtful(lines: list[Line]) -> bool:
    """Read with low confidence: Tesseract reads turned text as confident-less noise."""
    return bool(lines) and _confidence(lines) < DOUBTFUL_CONFIDENCE


def _has_ink(image: Image.Image) -> bool:
    """Dark pixels on a page where nothing was read: perhaps text turned sideways."""
    darkest, _ = cast(tuple[int, int], image.convert("L").getextrema())  # one band: (min, max)
    return darkest < 100


def _score(lines: list[Line]) -> float:
    return sum(ln.confidence * len(ln.text) for ln in lines)


def _confidence(lines: list[Line]) -> float:
    chars = sum(len(ln.text) for ln in lines)
    return round(_score(lines) / chars, 4) if chars else 0.0


def reading_order(lines: list[Line]) -> str:
    """Lines top to bottom; boxes on the same text line left to right."""
    if not lines:
        return ""
    height = statistics.median(ln.box[3] - ln.box[1] for ln in lines) or 1.0
    rows: list[list[Line]] = []
    for ln in sorted(lines, key=lambda ln: (ln.box[1] + ln.box[3]) / 2):
        centre = (ln.box[1] + ln.box[3]) / 2
        if rows and abs(centre - _centre(rows[-1])) < height / 2:
            rows[-1].append(ln)
        else:
            rows.append([ln])
    out = []
    for row in rows:
        out.append(engines._join_words([ln.text for ln in sorted(row, key=lambda ln: ln.box[0])]))
    return "\n".join(out)


def _centre(row: list[Line]) -> float:
    return sum((ln.box[1] + ln.box[3]) / 2 for ln in row) / len(row)


def summarize(pages: list[OcrPage], engine: str, languages: str) -> dict[str, Any]:
    """What outline, metadata and get_status show about a document's OCR."""
    read = [p for p in pages if p.error is None]
    summary: dict[str, Any] = {
        "engine": engine,
        "languages": languages,
        "pages": [p.number for p in pages],
        "mean_confidence": round(statistics.fmean(p.confidence for p in read), 4) if read else None,
    }
    failed = [{"page": p.number, "error": p.error} for p in pages if p.error]
    if failed:
        summary["failed_pages"] = failed
    return summary
