"""Image files (.png, .jpg, .tif multi-page, .webp, .bmp): one `page` unit per image or
TIFF frame, its text read by OCR. Without an OCR engine the document fails with
OCR_UNAVAILABLE instead of ingesting silently empty."""

from __future__ import annotations

import functools
import io
from typing import Any

from PIL import Image, ImageOps, ImageSequence

from pgrag.errors import ErrorCode

from ..ocr import OcrOptions, OcrPage, OcrUnavailable, ocr_images, summarize
from .base import ParsedDocument, ParseError, Source, Unit
from .limits import MAX_BINARY_BYTES, MAX_IMAGE_PIXELS, MAX_PAGES, too_large

EXTENSIONS = ("png", "jpg", "jpeg", "tif", "tiff", "webp", "bmp")
MAX_FRAMES = 2000
# Pillow only warns up to twice this and errors beyond; we check every frame's size
# ourselves before anything is decoded
Image.MAX_IMAGE_PIXELS = MAX_IMAGE_PIXELS


def page_meta(page: OcrPage, engine: str) -> dict[str, Any]:
    """Unit meta of an OCR'd page: marked as OCR text, with its confidence."""
    meta: dict[str, Any] = {"ocr": True, "ocr_engine": engine, "ocr_confidence": page.confidence}
    if page.rotated:
        meta["ocr_rotated"] = page.rotated
    if page.error:
        meta["ocr_error"] = page.error
    return meta


def _frame(data: bytes, index: int) -> Image.Image:
    """Frame `index` upright (EXIF orientation) in RGB; opened per page to bound memory."""
    with Image.open(io.BytesIO(data)) as img:
        img.seek(index)
        return ImageOps.exif_transpose(img.convert("RGB"))


def frame_sizes(data: bytes) -> tuple[list[tuple[int, int]], Any]:
    """Each frame's size (from the headers: nothing decoded yet) and the DPI; TOO_LARGE for
    a frame over MAX_IMAGE_PIXELS."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            frames: int = getattr(img, "n_frames", 1)
            if frames > MAX_PAGES:
                raise too_large(f"{frames:,} frames (at most {MAX_PAGES:,})")
            sizes: list[tuple[int, int]] = []
            for frame in ImageSequence.Iterator(img):
                width, height = frame.size
                if width * height > MAX_IMAGE_PIXELS:
                    raise too_large(
                        f"{width:,} x {height:,} pixels (at most {MAX_IMAGE_PIXELS:,} pixels)"
                    )
                sizes.append((width, height))
                if len(sizes) == MAX_FRAMES:
                    break
            return sizes, img.info.get("dpi")
    except Image.DecompressionBombError as exc:
        raise too_large(str(exc)) from None


def parse(src: Source, ocr: OcrOptions | None = None) -> ParsedDocument:
    ext = src.ext
    data = src.read(MAX_BINARY_BYTES)
    sizes, dpi = frame_sizes(data)
    numbers = list(range(1, len(sizes) + 1))
    try:
        pages, engine = ocr_images(
            numbers,
            [functools.partial(_frame, data, i) for i in range(len(sizes))],
            ocr or OcrOptions(),
        )
    except OcrUnavailable as exc:
        raise ParseError(
            ErrorCode.OCR_UNAVAILABLE, f".{ext} images need OCR: {exc.message}"
        ) from None
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
