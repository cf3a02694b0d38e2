"""Spreadsheets (.xlsx/.xlsm, .xls, .ods): one `sheet` unit per sheet.

Rows are streamed (openpyxl read-only mode, ODS via iterparse) so a 100k-row sheet does
not load styles or a cell object graph. Cells become displayed strings; row numbers stay
aligned with the sheet (leading empty rows are kept as empty rows).
"""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from collections.abc import Iterable, Iterator
from typing import Any

from lxml import etree

from ._common import check_shape, clean, format_cell, sheet_unit, to_utc
from .base import ParsedDocument, Source, Unit
from .limits import MAX_COLUMNS, MAX_ROWS, MAX_TEXT_BYTES, CellBudget, too_large


def _document(file_type: str, units: list[Unit], **kwargs: Any) -> ParsedDocument:
    sheets = [
        {"name": u.title, "rows": u.meta["rows"], "columns": u.meta["columns"]} for u in units
    ]
    outline = {"type": file_type, "sheets": sheets, "total_rows": sum(s["rows"] for s in sheets)}
    return ParsedDocument(file_type=file_type, units=units, outline=outline, **kwargs)


def _bounded(rows: Iterable[tuple[Any, ...]], budget: CellBudget) -> list[list[str]]:
    out: list[list[str]] = []
    for r in rows:
        budget.take(len(r) or 1)
        if len(out) == MAX_ROWS:
            raise too_large(f"more than {MAX_ROWS:,} rows")
        out.append([format_cell(v) for v in r])
    return out


def parse_xlsx(src: Source, file_type: str = "xlsx") -> ParsedDocument:
    from openpyxl import load_workbook

    # a file object, not the path: openpyxl refuses names not ending in .xlsx/.xlsm,
    # and many .xls files are renamed .xlsx ones
    src.file.seek(0)
    wb = load_workbook(src.file, read_only=True, data_only=True, keep_links=False)
    budget = CellBudget()
    try:
        units = []
        for number, name in enumerate(wb.sheetnames, 1):
            ws = wb[name]
            rows: list[list[str]] = []
            if hasattr(ws, "iter_rows"):  # chartsheets have no cells
                # the declared <dimension> is never trusted (a 1.5 KB file can declare
                # A1:XFD1048576, and openpyxl would pad every row to it): rows are as long
                # as their last cell, counted as we go
                ws.reset_dimensions()
                rows = _bounded(ws.iter_rows(values_only=True), budget)
            units.append(sheet_unit(number, name, rows))
        props = wb.properties
        return _document(
            file_type,
            units,
            title=clean(props.title),
            author=clean(props.creator),
            created=to_utc(props.created),
            modified=to_utc(props.modified),
        )
    finally:
        wb.close()


def parse_xls(src: Source) -> ParsedDocument:
    import xlrd

    data = src.read(MAX_TEXT_BYTES)
    if data[:4] == b"PK\x03\x04":  # an .xlsx saved with the old extension
        return parse_xlsx(src, file_type="xls")
    # xlrd prints warnings to stdout unless given a log file
    book = xlrd.open_workbook(file_contents=data, on_demand=True, logfile=io.StringIO())
    budget = CellBudget()
    try:
        units = []
        for number in range(book.nsheets):
            sheet = book.sheet_by_index(number)
            check_shape(sheet.nrows, sheet.ncols)
            budget.take(sheet.nrows * sheet.ncols)
            rows = [
                [
                    _xls_cell(book, sheet.cell_type(r, c), sheet.cell_value(r, c))
                    for c in range(sheet.row_len(r))
                ]
                for r in range(sheet.nrows)
            ]
            units.append(sheet_unit(number + 1, sheet.name, rows))
            if book.on_demand:
                book.unload_sheet(number)
        return _document("xls", units, author=clean(getattr(book, "user_name", None)))
    finally:
        book.release_resources()


def _xls_cell(book: Any, ctype: int, value: Any) -> str:
    import xlrd

    if ctype == xlrd.XL_CELL_DATE:
        try:
            return format_cell(xlrd.xldate_as_datetime(value, book.datemode))
        except (ValueError, OverflowError, xlrd.xldate.XLDateError):
            return format_cell(value)
    if ctype == xlrd.XL_CELL_BOOLEAN:
        return format_cell(bool(value))
    if ctype == xlrd.XL_CELL_ERROR:
        return str(xlrd.error_text_from_code.get(value, "#ERR"))
    return format_cell(value)


# ---- OpenDocument spreadsheet: content.xml read with lxml, no extra dependency ----------

_T = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_O = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
_X = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
_META = "urn:oasis:names:tc:opendocument:xmlns:meta:1.0"
_DC = "http://purl.org/dc/elements/1.1/"
_MAX_REPEAT = 100_000  # repeated *non-empty* rows/cells beyond this are a bloated file
_MAX_SPACES = 1024  # <text:s text:c="N"/>: N spaces


def parse_ods(src: Source) -> ParsedDocument:
    src.file.seek(0)
    budget = CellBudget()
    with zipfile.ZipFile(src.file) as zf:
        with zf.open("content.xml") as f:
            units = [
                sheet_unit(n, name, rows)
                for n, (name, rows) in enumerate(_ods_tables(f, budget), 1)
            ]
        meta = _ods_meta(zf)
    return _document("ods", units, **meta)


def _ods_tables(f: Any, budget: CellBudget) -> Iterator[tuple[str, list[list[str]]]]:
    """(name, rows) per table. Spreadsheets pad sheets with "1048570 empty rows" and
    "16000 empty cells": empty runs are counted, and materialised only if data follows;
    what is materialised is counted against the budget first."""
    rows: list[list[str]] = []
    pending_rows = 0
    context = etree.iterparse(
        f,
        events=("end",),
        tag=(f"{{{_T}}}table-row", f"{{{_T}}}table"),
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
    )
    for _, el in context:
        if el.tag == f"{{{_T}}}table":
            yield el.get(f"{{{_T}}}name") or "", rows
            rows, pending_rows = [], 0
            el.clear()
            continue
        repeat = int(el.get(f"{{{_T}}}number-rows-repeated", "1"))
        row = _ods_row(el)
        el.clear()
        if not any(row):
            pending_rows += repeat
            continue
        repeat = min(repeat, _MAX_REPEAT)
        if len(rows) + pending_rows + repeat > MAX_ROWS:
            raise too_large(f"more than {MAX_ROWS:,} rows")
        budget.take(pending_rows + len(row) * repeat)
        rows.extend([] for _ in range(pending_rows))
        pending_rows = 0
        rows.extend(list(row) for _ in range(repeat))


def _ods_row(row_el: Any) -> list[str]:
    cells: list[str] = []
    pending = 0
    for cell in row_el:
        if not isinstance(cell.tag, str) or not cell.tag.endswith("table-cell"):
            continue  # table:covered-table-cell ends with "table-cell" too
        repeat = int(cell.get(f"{{{_T}}}number-columns-repeated", "1"))
        value = _ods_value(cell)
        if not value:
            pending += repeat
            continue
        repeat = min(repeat, _MAX_REPEAT)
        if len(cells) + pending + repeat > MAX_COLUMNS:
            raise too_large(f"more than {MAX_COLUMNS:,} columns")
        cells.extend([""] * pending)
        pending = 0
        cells.extend([value] * repeat)
    return cells


def _ods_value(cell: Any) -> str:
    kind = cell.get(f"{{{_O}}}value-type")
    if kind in ("float", "percentage", "currency"):
        try:
            return format_cell(float(cell.get(f"{{{_O}}}value", "")))
        except ValueError:
            pass
    elif kind == "date":
        raw: str = cell.get(f"{{{_O}}}date-value", "")
        try:
            return format_cell(dt.datetime.fromisoformat(raw))
        except ValueError:
            return raw
    elif kind == "boolean":
        return format_cell(cell.get(f"{{{_O}}}boolean-value") == "true")
    paragraphs = cell.findall(f"{{{_X}}}p")
    return "\n".join("".join(_ods_text(p)) for p in paragraphs)


def _ods_text(el: Any) -> Iterator[str]:
    if el.text:
        yield el.text
    for child in el:
        local = etree.QName(child).localname if isinstance(child.tag, str) else ""
        if local == "s":
            yield " " * min(int(child.get(f"{{{_X}}}c", "1")), _MAX_SPACES)
        elif local == "tab":
            yield "\t"
        elif local == "line-break":
            yield "\n"
        elif local != "annotation":
            yield from _ods_text(child)
        if child.tail:
            yield child.tail


def _ods_meta(zf: zipfile.ZipFile) -> dict[str, Any]:
    if "meta.xml" not in zf.namelist():
        return {}
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    root = etree.fromstring(zf.read("meta.xml"), parser)

    def text(tag: str) -> str | None:
        el = root.find(f".//{tag}")
        return clean(el.text) if el is not None else None

    def date(tag: str) -> dt.datetime | None:
        raw = text(tag)
        try:
            return to_utc(dt.datetime.fromisoformat(raw)) if raw else None
        except ValueError:
            return None

    return {
        "title": text(f"{{{_DC}}}title"),
        "author": text(f"{{{_META}}}initial-creator") or text(f"{{{_DC}}}creator"),
        "created": date(f"{{{_META}}}creation-date"),
        "modified": date(f"{{{_DC}}}date"),
    }
