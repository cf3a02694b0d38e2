"""OCR for scanned PDF pages and image files: engines, a content-hash cache, a page runner.

Parsers call `ocr_images`; everything engine-specific stays in `engines.py`.
"""

from __future__ import annotations

from .engines import OcrUnavailable
from .runner import OcrOptions, OcrPage, ocr_images, summarize

__all__ = [
    "OcrOptions",
    "OcrPage",
    "OcrUnavailable",
    "ocr_images",
    "summarize",
]
