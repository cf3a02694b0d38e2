"""The PDF pages that need OCR (no usable text layer over an image), rendered with
pypdfium2 and read by the OCR runner. Mixed PDFs: only those pages."""

from __future__ import annotations

import functools
import threading
from typing import Any

from PIL import Image

from pgrag.errors import ErrorCode

from ..ocr import OcrOptions, OcrUnavailable, ocr_images, summarize
from .base import ParseError, Source, Unit
from .image import page_meta
from .limits import MAX_BINARY_BYTES

MIN_TEXT_CHARS = 20  # fewer non-space characters than this over an image: a scanned page
RENDER_DPI = 300
MAX_RENDER_SIDE = 5000  # pixels; a poster-size page is scaled down to this
_PDFIUM = threading.Lock()  # PDFium is not thread-safe: one render at a time


def _has_image(page: Any, depth: int = 0) -> bool:
    """An image XObject on the page (or in a form it draws), or an inline image."""
    try:
        resources = page.get("/Resources") or {}
        resources = resources.get_object() if hasattr(resources, "get_object") else resources
        xobjects = resources.get("/XObject") or {}
        xobjects = xobjects.get_object() if hasattr(xobjects, "get_object") else xobjects
        for ref in xobjects.values():
            obj = ref.get_object()
            if obj.get("/Subtype") == "/Image":
                return True
            if obj.get("/Subtype") == "/Form" and depth < 2 and _has_image(obj, depth + 1):
                return True
        if depth == 0:
            contents = page.get_contents()
            return contents is not None and b"BI" in contents.get_data()
    except Exception:
        return False
    return False


def needs_ocr(page: Any, text: str) -> bool:
    return sum(1 for ch in text if not ch.isspace()) < MIN_TEXT_CHARS and _has_image(page)


def _render(data: bytes, index: int) -> Image.Image:
    import pypdfium2 as pdfium

    with _PDFIUM:
        pdf = pdfium.PdfDocument(data)
        try:
            page = pdf[index]
            width, height = page.get_size()  # points
            scale = min(RENDER_DPI / 72, MAX_RENDER_SIDE / max(width, height, 1))
            image: Image.Image = page.render(scale=scale).to_pil().convert("RGB")
            return image
        finally:
            pdf.close()


def ocr_pages(
    src: Source, units: list[Unit], numbers: list[int], options: OcrOptions | None
) -> dict[str, Any]:
    """Replace the bodies of `numbers` (1-based) with OCR text; the summary for the
    document. Raises ParseError(ErrorCode.OCR_UNAVAILABLE) when no engine is installed."""
    options = options or OcrOptions()
    try:
        import pypdfium2  # noqa: F401
    except ImportError:
        raise ParseError(
            ErrorCode.OCR_UNAVAILABLE,
            f"{len(numbers)} page(s) are scanned images and need OCR: "
            "pypdfium2 is not installed (pip install pypdfium2)",
        ) from None
    data = src.read(MAX_BINARY_BYTES)
    try:
        pages, engine = ocr_images(
            numbers, [functools.partial(_render, data, n - 1) for n in numbers], options
        )
    except OcrUnavailable as exc:
        raise ParseError(
            ErrorCode.OCR_UNAVAILABLE, f"{len(numbers)} page(s) are scanned images: {exc.message}"
        ) from None
    for page in pages:
        unit = units[page.number - 1]
        unit.body = page.text
        unit.meta = {**unit.meta, **page_meta(page, engine)}
    return summarize(pages, engine, options.languages)
