"""OCR for scanned PDF pages and image files: engines, a content-hash cache, a page runner.

Parsers call `ocr_images`; everything engine-specific stays in `engines.py`.
"""

from __future__ import annotations

from .engines import OCR_UNAVAILABLE, OcrUnavailable
from .runner import OcrOptions, OcrPage, ocr_images, summarize

__all__ = [
    "OCR_UNAVAILABLE",
    "OcrOptions",
    "OcrPage",
    "OcrUnavailable",
    "ocr_images",
    "summarize",
]
