"""Bounds on what one file may expand to. A few kilobytes can declare a sheet of 17 billion
cells, repeat an ODS row a million times, or unzip to gigabytes: every parser checks these
before it materialises anything, and a file over one fails with TOO_LARGE. The parse worker's
memory limit (PGRAG_PARSE_MEMORY_MB) backs them up for whatever they miss."""

from __future__ import annotations

import zipfile
from typing import BinaryIO

from pgrag.errors import ErrorCode

from .base import ParseError

MAX_TEXT_BYTES = 128 << 20  # .txt .md .csv .html .xml .xls read whole
MAX_BINARY_BYTES = 512 << 20  # images, and PDFs with pages to OCR, read whole
MAX_SHEET_CELLS = 5_000_000  # per file, counted after rows are padded to one width
MAX_COLUMNS = 16_384  # Excel's and LibreOffice's own limits
MAX_ROWS = 1_048_576
MAX_ZIP_MEMBERS = 20_000  # .docx .pptx .xlsx .ods are zip files
MAX_ZIP_BYTES = 1 << 30  # all members, uncompressed, as declared
MAX_ZIP_XML_BYTES = 64 << 20  # one XML part, uncompressed (parsed into a tree)
MAX_IMAGE_PIXELS = 64_000_000  # 8,000 x 8,000: a 600 dpi A3 scan fits
MAX_PAGES = 10_000  # PDF pages, TIFF frames, slides
MAX_FILE_BYTES = 4 << 30  # any other file: what no supported format is parsed beyond
_READ_AS_TEXT = frozenset({"txt", "md", "markdown", "csv", "tsv", "html", "htm", "xml", "xls"})
_READ_AS_IMAGE = frozenset({"png", "jpg", "jpeg", "tif", "tiff", "webp", "bmp"})


def file_bound(ext: str) -> int:
    """The largest file of this type a parser reads: checked on its size before the file
    is hashed, so a sparse 20 GB file is not read through on every run."""
    ext = ext.lower().lstrip(".")
    if ext in _READ_AS_TEXT:
        return MAX_TEXT_BYTES
    return MAX_BINARY_BYTES if ext in _READ_AS_IMAGE else MAX_FILE_BYTES


def too_large(what: str) -> ParseError:
    return ParseError(ErrorCode.TOO_LARGE, f"the file expands beyond a bound: {what}")


def check_zip(f: BinaryIO) -> None:
    """Refuse a zip whose declared sizes are over the bounds. Python's zipfile never
    inflates a member past its declared size (the CRC check fails first), so the declared
    sizes bound what the OOXML/ODF readers can unpack."""
    f.seek(0)
    try:
        with zipfile.ZipFile(f) as zf:
            members = zf.infolist()
    except zipfile.BadZipFile:
        f.seek(0)
        return  # the format's own reader says what is wrong
    f.seek(0)
    if len(members) > MAX_ZIP_MEMBERS:
        raise too_large(f"{len(members)} parts in the zip (at most {MAX_ZIP_MEMBERS})")
    total = sum(m.file_size for m in members)
    if total > MAX_ZIP_BYTES:
        raise too_large(f"{total >> 20} MB unzipped (at most {MAX_ZIP_BYTES >> 20} MB)")
    for m in members:
        if m.filename.endswith((".xml", ".rels")) and m.file_size > MAX_ZIP_XML_BYTES:
            raise too_large(
                f"{m.filename} is {m.file_size >> 20} MB unzipped "
                f"(at most {MAX_ZIP_XML_BYTES >> 20} MB per XML part)"
            )


class CellBudget:
    """Counts the cells a spreadsheet materialises, across its sheets."""

    def __init__(self, limit: int = MAX_SHEET_CELLS) -> None:
        self.left = limit
        self.limit = limit

    def take(self, cells: int) -> None:
        self.left -= cells
        if self.left < 0:
            raise too_large(f"more than {self.limit:,} cells")
