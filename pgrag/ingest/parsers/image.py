"""Image files (.png, .jpg, .tif multi-page, .webp, .bmp): one `page` unit per image or
TIFF frame, its text read by OCR. Without an OCR engine the document fails with
OCR_UNAVAILABLE instead of ingesting silently empty."""

from __future__ import annotations

import functools
import pathlib
from typing import Any

from PIL import Image, ImageOps, ImageSequence

from ..ocr import OCR_UNAVAILABLE, OcrOptions, OcrPage, OcrUnavailable, ocr_images, summarize
from .base import ParsedDocument, ParseError, Unit

EXTENSIONS = ("png", "jpg", "jpeg", "tif", "tiff", "webp", "bmp")
MAX_FRAMES = 2000
Image.MAX_IMAGE_PIXELS = 200_000_000  # a 600 dpi A0 scan; larger is a decompression bomb


def page_meta(page: OcrPage, engine: str) -> dict[str, Any]:
    """Unit meta of an OCR'd page: marked as OCR text, with its confidence."""
    meta: dict[str, Any] = {"ocr": True, "ocr_engine": engine, "ocr_confidence": page.confidence}
    if page.rotated:
        meta["ocr_rotated"] = page.rotated
    if page.error:
        meta["ocr_error"] = page.error
    return meta


def _frame(path: pathlib.Path, index: int) -> Image.Image:
    """Frame `index` upright (EXIF orientation) in RGB; opened per page to bound memory."""
    with Image.open(path) as img:
        img.seek(index)
        return ImageOps.exif_transpose(img.convert("RGB"))


def parse(path: pathlib.Path, ocr: OcrOptions | None = None) -> ParsedDocument:
    ext = path.suffix.lower().lstrip(".")
    with Image.open(path) as img:
        sizes = [frame.size for frame in ImageSequence.Iterator(img)][:MAX_FRAMES]
        dpi = img.info.get("dpi")
    numbers = list(range(1, len(sizes) + 1))
    try:
        pages, engine = ocr_images(
            numbers,
            [functools.partial(_frame, path, i) for i in range(len(sizes))],
            ocr or OcrOptions(),
        )
    except OcrUnavailable as exc:
        raise ParseError(OCR_UNAVAILABLE, f".{ext} images need OCR: {exc.message}") from None
    units = [
        Unit(
            kind="page",
            number=p.number,
            body=p.text,
            meta={**page_meta(p, engine), "width": w, "height": h},
        )
        for p, (w, h) in zip(pages, sizes, strict=True)
    ]
    summary = summarize(pages, engine, (ocr or OcrOptions()).languages)
    outline: dict[str, Any] = {
        "type": ext,
        "total_pages": len(units),
        "pages": [
            {
                "page": u.number,
                "width": u.meta["width"],
                "height": u.meta["height"],
                "ocr_confidence": u.meta["ocr_confidence"],
            }
            for u in units
        ],
        "ocr": summary,
    }
    metadata: dict[str, Any] = {"ocr": summary}
    if dpi:
        metadata["dpi"] = [round(float(d)) for d in dpi]
    if summary.get("failed_pages"):
        metadata["warnings"] = [
            f"page {f['page']}: OCR failed ({f['error']})" for f in summary["failed_pages"]
        ]
    return ParsedDocument(file_type=ext, units=units, outline=outline, metadata=metadata)
