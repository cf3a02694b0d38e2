"""PDF via pypdf (BSD; PyMuPDF is AGPL): one `page` unit per page, bookmarks as outline.

One unreadable page or a broken outline should not cost the whole document, so those
are recorded in `metadata["warnings"]` instead of failing the parse.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from typing import Any

from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError

from pgrag.errors import ErrorCode

from ..ocr import OcrOptions
from ._common import clean
from .base import ParsedDocument, ParseError, Source, Unit
from .limits import MAX_PAGES, too_large
from .pdf_ocr import needs_ocr, ocr_pages

# D:YYYYMMDDHHmmSSOHH'mm' with every part after the year optional (PDF 32000 §7.9.4);
# real files add spaces, drop the "D:", or end the offset with a stray apostrophe.
_PDF_DATE = re.compile(
    r"^\s*(?:D:)?\s*(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?"
    r"\s*(?:([Zz+\-])\s*(\d{2})?'?\s*(\d{2})?'?)?"
)
_MAX_BOOKMARKS = 5000


def parse_pdf_date(raw: object) -> dt.datetime | None:
    """A PDF date string as an aware UTC datetime (no offset given: taken as UTC);
    None if absent or unparseable."""
    if raw is None:
        return None
    m = _PDF_DATE.match(str(raw))
    if not m:
        return None
    year, month, day, hour, minute, second, sign, off_h, off_m = m.groups()
    try:
        tz = dt.UTC
        if sign in ("+", "-"):
            offset = dt.timedelta(hours=int(off_h or 0), minutes=int(off_m or 0))
            tz = dt.timezone(offset if sign == "+" else -offset)
        value = dt.datetime(
            int(year),
            int(month or 1),
            int(day or 1),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            tzinfo=tz,
        )
    except (ValueError, OverflowError):
        return None
    return value.astimezone(dt.UTC)


def _info(info: Any, key: str) -> object:
    value = info.get(key)
    return value.get_object() if hasattr(value, "get_object") else value


def _bookmarks(reader: PdfReader, items: Any, level: int = 1) -> Iterator[dict[str, Any]]:
    for item in items:
        if isinstance(item, list):
            yield from _bookmarks(reader, item, level + 1)
            continue
        try:
            index = reader.get_destination_page_number(item)
        except Exception:  # a dangling destination; keep the title
            index = -1
        yield {
            "title": str(item.title or "").strip(),
            "page": index + 1 if index is not None and index >= 0 else None,
            "level": level,
        }


def parse(src: Source, ocr: OcrOptions | None = None) -> ParsedDocument:
    """Text layer per page; pages that are only a scanned image go through OCR."""
    src.file.seek(0)
    reader = PdfReader(src.file)
    if reader.is_encrypted:
        try:
            opened = reader.decrypt("")
        except DependencyError as exc:
            raise ParseError(ErrorCode.ENCRYPTED, f"encrypted PDF: {exc}") from None
        if opened == PasswordType.NOT_DECRYPTED:
            raise ParseError(
                ErrorCode.ENCRYPTED, "the PDF is password-protected; remove the password"
            )
    if len(reader.pages) > MAX_PAGES:
        raise too_large(f"{len(reader.pages):,} pages (at most {MAX_PAGES:,})")
    warnings: list[str] = []
    units = []
    scanned: list[int] = []
    for number, page in enumerate(reader.pages, 1):
        try:
            text = page.extract_text() or ""
        except Exception as exc:
            warnings.append(f"page {number}: text not extracted ({type(exc).__name__}: {exc})")
            text = ""
        units.append(Unit(kind="page", number=number, body=text))
        if needs_ocr(page, text):
            scanned.append(number)
    ocr_summary = ocr_pages(src, units, scanned, ocr) if scanned else None
    try:
        bookmarks = list(_bookmarks(reader, reader.outline))[:_MAX_BOOKMARKS]
    except Exception as exc:
        warnings.append(f"outline not read ({type(exc).__name__}: {exc})")
        bookmarks = []
    try:
        info: dict[Any, Any] = reader.metadata or {}
    except Exception as exc:
        warnings.append(f"metadata not read ({type(exc).__name__}: {exc})")
        info = {}
    metadata: dict[str, Any] = {"encrypted": reader.is_encrypted}
    outline: dict[str, Any] = {"type": "pdf", "total_pages": len(units), "bookmarks": bookmarks}
    if ocr_summary:
        metadata["ocr"] = outline["ocr"] = ocr_summary
        warnings += [
            f"page {f['page']}: OCR failed ({f['error']})"
            for f in ocr_summary.get("failed_pages", [])
        ]
    if warnings:
        metadata["warnings"] = warnings
    return ParsedDocument(
        file_type="pdf",
        units=units,
        title=clean(_info(info, "/Title")),
        author=clean(_info(info, "/Author")),
        created=parse_pdf_date(_info(info, "/CreationDate")),
        modified=parse_pdf_date(_info(info, "/ModDate")),
        outline=outline,
        metadata=metadata,
    )
