"""Helpers shared by the parsers: text decoding, date normalisation, cell formatting."""

from __future__ import annotations

import codecs
import datetime as dt
from typing import Any

from charset_normalizer import from_bytes

from pgrag.errors import ErrorCode

from .base import ParseError, Source, Unit
from .limits import MAX_COLUMNS, MAX_ROWS, MAX_SHEET_CELLS, MAX_TEXT_BYTES, too_large

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: its BOM starts with FF FE
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# When charset-normalizer cannot tell candidates apart (short samples: "数据库" in GBK is
# equally plausible as Big5 or CP949), prefer the encodings our users most likely have.
_PREFERRED = ("gb18030", "cp1252", "cp1251")
_DETECT_SAMPLE = 256 * 1024


def decode_bytes(data: bytes) -> tuple[str, str]:
    """Decode file bytes to text and name the encoding used.

    BOM first, then strict UTF-8 (the common case, and charset-normalizer sometimes
    mislabels short UTF-8), then charset-normalizer with a tie-break towards GB18030.
    NUL characters are dropped: they carry no text and PostgreSQL cannot store them.
    """
    text, encoding = _decode(data)
    return text.replace("\x00", ""), encoding


def _decode(data: bytes) -> tuple[str, str]:
    if not data:
        return "", "utf-8"
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding), encoding
            except UnicodeDecodeError as exc:
                raise ParseError(
                    ErrorCode.ENCODING_ERROR, f"invalid {encoding} text: {exc}"
                ) from None
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    detected = _detect(data)
    if detected is not None:
        try:
            return data.decode(detected), detected
        except (UnicodeDecodeError, LookupError):
            pass  # detection ran on a sample; the rest of the file disagrees
    if data.count(0) > len(data) // 10:
        raise ParseError(ErrorCode.ENCODING_ERROR, "file looks binary, not text")
    return data.decode("utf-8", errors="replace"), "utf-8"


def _detect(data: bytes) -> str | None:
    sample = data[:_DETECT_SAMPLE]
    if len(data) > _DETECT_SAMPLE:
        # do not cut a multi-byte character in half at the end of the sample
        cut = sample.rfind(b"\n")
        if cut > 0:
            sample = sample[: cut + 1]
    matches = list(from_bytes(sample))
    if not matches:
        return None
    best = min(m.chaos for m in matches)
    tied = [m.encoding for m in matches if m.chaos <= best + 1e-9]
    for preferred in _PREFERRED:
        if preferred in tied:
            return preferred
    return tied[0]


def read_text(src: Source) -> tuple[str, str]:
    """Read and decode a text file; newlines normalised to "\\n"."""
    text, encoding = decode_bytes(src.read(MAX_TEXT_BYTES))
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, encoding


def clean(value: object) -> str | None:
    """A metadata string, or None when missing or blank."""
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def to_utc(value: object) -> dt.datetime | None:
    """Metadata dates as aware UTC datetimes; naive ones are taken as UTC (what the
    OOXML core properties store)."""
    if not isinstance(value, dt.datetime):
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def format_cell(value: object) -> str:
    """A spreadsheet value as a user would read it: 3 not 3.0, 0.3 not
    0.30000000000000004, dates in ISO 8601, booleans as Excel shows them."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.15g}"
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0) and value.tzinfo is None:
            return value.date().isoformat()
        return value.isoformat(timespec="microseconds" if value.microsecond else "seconds")
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return str(value)
    return str(value)


def column_letter(index: int) -> str:
    """1 -> "A", 27 -> "AA" (no openpyxl import needed for CSV)."""
    letters = ""
    while index > 0:
        index, rem = divmod(index - 1, 26)
        letters = chr(65 + rem) + letters
    return letters


def check_shape(rows: int, columns: int) -> None:
    """A sheet is padded to rows x columns: refuse a shape that would be over the bounds
    (one 10,000-column row above 10,000 short ones pads to 100 million cells)."""
    if columns > MAX_COLUMNS:
        raise too_large(f"{columns:,} columns (at most {MAX_COLUMNS:,})")
    if rows > MAX_ROWS:
        raise too_large(f"{rows:,} rows (at most {MAX_ROWS:,})")
    if rows * columns > MAX_SHEET_CELLS:
        raise too_large(f"{rows:,} rows x {columns:,} columns (at most {MAX_SHEET_CELLS:,} cells)")


def sheet_unit(number: int, title: str | None, raw_rows: list[list[str]]) -> Unit:
    """A `sheet` unit from displayed-string rows (row 1 first): trailing empty rows and
    columns trimmed, rows padded to one width, body one line per row ("a | b | c") with
    `row_offsets` so a row can be cited and sliced back out of the body."""
    while raw_rows and not any(raw_rows[-1]):
        raw_rows.pop()
    width = 0
    for row in raw_rows:
        for i in range(len(row) - 1, width - 1, -1):
            if row[i]:
                width = i + 1
                break
    check_shape(len(raw_rows), width)
    rows = [row[:width] + [""] * (width - len(row)) for row in raw_rows]
    offsets: list[int] = []
    lines: list[str] = []
    pos = 0
    for row in rows:
        last = len(row)
        while last and not row[last - 1]:
            last -= 1
        line = " | ".join(c.replace("\r\n", " ").replace("\n", " ") for c in row[:last])
        offsets.append(pos)
        lines.append(line)
        pos += len(line) + 1
    meta: dict[str, Any] = {
        "rows": len(rows),
        "columns": width,
        "header": list(rows[0]) if rows else [],
        "dimension": f"A1:{column_letter(width)}{len(rows)}" if rows and width else None,
    }
    return Unit(
        kind="sheet",
        number=number,
        body="\n".join(lines),
        title=title,
        meta=meta,
        rows=rows,
        row_offsets=offsets,
    )
