"""Pick a parser by file extension; turn every failure into a ParseError with a stable code.

Parser modules are imported on first use: openpyxl, python-pptx and bs4 together cost
about half a second of import time that a `.txt`-only folder should not pay.
"""

from __future__ import annotations

import functools
import importlib
import os
import pathlib
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from pgrag.errors import ErrorCode

from .base import ParsedDocument, ParseError, Source, Unit
from .limits import check_zip

if TYPE_CHECKING:
    from ..ocr import OcrOptions

__all__ = [
    "SUPPORTED_EXTENSIONS",
    "ParseError",
    "ParsedDocument",
    "Unit",
    "parse",
]

# extension -> (module, function); the function takes a Source
_PARSERS: dict[str, tuple[str, str]] = {
    "pdf": ("pdf", "parse"),
    "docx": ("docx", "parse"),
    "pptx": ("pptx", "parse"),
    "xlsx": ("sheets", "parse_xlsx"),
    "xlsm": ("sheets", "parse_xlsx"),
    "xls": ("sheets", "parse_xls"),
    "ods": ("sheets", "parse_ods"),
    "csv": ("csv_parser", "parse"),
    "tsv": ("csv_parser", "parse"),
    "txt": ("text", "parse"),
    "md": ("markdown", "parse"),
    "markdown": ("markdown", "parse"),
    "html": ("html", "parse"),
    "htm": ("html", "parse"),
    "xml": ("xml", "parse"),
    **{ext: ("image", "parse") for ext in ("png", "jpg", "jpeg", "tif", "tiff", "webp", "bmp")},
}
# parsers that may OCR: they take the OCR options
_OCR = frozenset({"pdf", "png", "jpg", "jpeg", "tif", "tiff", "webp", "bmp"})
# converted by LibreOffice when installed (see legacy.py)
_LEGACY = {"doc": "docx", "rtf": "docx", "odt": "docx", "ppt": "pptx", "odp": "pptx"}
# zip/OLE/PDF containers: zero bytes cannot be a valid file. Text types parse to "".
_BINARY = frozenset({"docx", "pptx", "xlsx", "xlsm", "xls", "ods", *_LEGACY, *_OCR})
# zip containers: their declared sizes are checked before any reader unpacks them
_ZIPS = frozenset({"docx", "pptx", "xlsx", "xlsm", "xls", "ods", "odt", "odp"})

SUPPORTED_EXTENSIONS: frozenset[str] = frozenset({*_PARSERS, *_LEGACY})


def _function(ext: str) -> Callable[[Source], ParsedDocument]:
    module_name, name = _PARSERS[ext]
    module = importlib.import_module(f"{__name__}.{module_name}")
    function: Callable[..., ParsedDocument] = getattr(module, name)
    if name == "parse_xlsx" and ext != "xlsx":
        return lambda p: function(p, file_type=ext)
    return function


def _parser_for(ext: str) -> Callable[..., ParsedDocument]:
    """Resolved (and imported) before parsing, so a bug in our import is not reported
    as a corrupt file. Called with a Source; the OCR formats also take `ocr=`."""
    via_libreoffice = _LEGACY.get(ext)
    if ext == "xls":
        try:
            import xlrd  # noqa: F401
        except ImportError:
            via_libreoffice = "xlsx"
    if via_libreoffice is None:
        return _function(ext)
    from . import legacy

    target = _function(via_libreoffice)
    return lambda p: legacy.parse(p, target)


def parse(
    path: pathlib.Path | str, *, ocr: OcrOptions | None = None, opened: BinaryIO | None = None
) -> ParsedDocument:
    """Parse one file: `opened` (by the rules of files.py) when given, else `path`, opened
    by the same rules. Raises only ParseError (code UNSUPPORTED_FORMAT, UNREADABLE,
    CORRUPT_FILE, ENCRYPTED, ENCODING_ERROR, OCR_UNAVAILABLE, TOO_LARGE, or the codes of
    files.UnsafeFile)."""
    path = pathlib.Path(path)
    ext = path.suffix.lower().lstrip(".")
    if ext not in SUPPORTED_EXTENSIONS:
        shown = f".{ext}" if ext else "files without an extension"
        raise ParseError(
            ErrorCode.UNSUPPORTED_FORMAT,
            f"{shown} is not supported; supported: {', '.join(sorted(SUPPORTED_EXTENSIONS))}",
        )
    if opened is not None:
        return _parse_opened(path, ext, opened, ocr)
    from pgrag.ingest.files import open_in_root  # files.py imports this package

    try:
        f = open_in_root(path.parent, path.name)
    except OSError as exc:
        raise ParseError(
            ErrorCode.UNREADABLE, f"cannot read the file: {exc.strerror or exc}"
        ) from None
    with f:
        return _parse_opened(path, ext, f, ocr)


def _parse_opened(
    path: pathlib.Path, ext: str, f: BinaryIO, ocr: OcrOptions | None
) -> ParsedDocument:
    if os.fstat(f.fileno()).st_size == 0 and ext in _BINARY:
        raise ParseError(
            ErrorCode.CORRUPT_FILE, f"the file is empty (0 bytes), not a valid .{ext} file"
        )
    parser = _parser_for(ext)
    if ext in _OCR:
        parser = functools.partial(parser, ocr=ocr)
    try:
        if ext in _ZIPS:
            check_zip(f)
        return parser(Source(path, f))
    except ParseError:
        raise
    except Exception as exc:  # any library failure on a bad file: a readable reason
        if _out_of_memory(exc):
            raise ParseError(
                ErrorCode.TOO_LARGE, "the file needs more memory than a parse may take"
            ) from None
        reason = str(exc).strip() or "no details"
        raise ParseError(
            ErrorCode.CORRUPT_FILE,
            f"could not read the .{ext} file ({type(exc).__name__}: {reason})",
        ) from exc


def _out_of_memory(exc: Exception) -> bool:
    """A MemoryError, or libxml2 failing to allocate (lxml reports it as a syntax error)."""
    if isinstance(exc, MemoryError):
        return True
    from lxml import etree

    return (
        isinstance(exc, etree.LxmlError)
        and getattr(exc, "code", None) == etree.ErrorTypes.ERR_NO_MEMORY
    )
