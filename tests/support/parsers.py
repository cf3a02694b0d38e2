"""Helpers and fixtures of tests/test_parsers*.py."""

from __future__ import annotations

import datetime as dt
import pathlib
import struct
import zipfile

import pytest

from pgrag.ingest.parsers import ParseError, parse


def make_pdf(path: pathlib.Path, *, title: str = "Annual Report", author: str = "Ada") -> None:
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path))
    c.setTitle(title)
    c.setAuthor(author)
    entries = [("Introduction", 0), ("Financial Overview", 0), ("Revenue Details", 1)]
    for i, (heading, level) in enumerate(entries, 1):
        c.drawString(72, 720, f"{heading} on page {i}")
        c.bookmarkPage(f"p{i}")
        c.addOutlineEntry(heading, f"p{i}", level=level)
        c.showPage()
    c.save()


def make_docx(path: pathlib.Path, *, page_break: bool = True):
    import docx

    d = docx.Document()
    d.core_properties.title = "Supply Contract"
    d.core_properties.author = "Grace"
    d.add_paragraph("Preamble before any heading.")
    d.add_heading("Chapter One", level=1)
    d.add_paragraph("First chapter text.")
    table = d.add_table(rows=2, cols=3)
    for r, values in enumerate([("a", "b", "c"), ("1", "2", "3")]):
        for c, value in enumerate(values):
            table.cell(r, c).text = value
    d.add_paragraph("After the table.")
    if page_break:
        d.add_page_break()
    d.add_heading("Chapter Two", level=2)
    d.add_paragraph("Second chapter text.")
    d.save(str(path))
    return d


def make_pptx(path: pathlib.Path) -> None:
    import pptx
    from pptx.util import Inches

    prs = pptx.Presentation()
    prs.core_properties.title = "Q4 Review"
    prs.core_properties.author = "Linus"
    s1 = prs.slides.add_slide(prs.slide_layouts[1])  # title and content
    s1.shapes.title.text = "Q4 Business Review"
    s1.placeholders[1].text = "Revenue grew 12%"
    s1.notes_slide.notes_text_frame.text = "Mention the churn numbers"
    s2 = prs.slides.add_slide(prs.slide_layouts[6])  # blank: no title placeholder
    s2.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1)).text_frame.text = "Agenda"
    table = s2.shapes.add_table(2, 2, Inches(1), Inches(3), Inches(4), Inches(1)).table
    for r, values in enumerate([("Region", "Sales"), ("EU", "42")]):
        for c, value in enumerate(values):
            table.cell(r, c).text = value
    prs.save(str(path))


def make_xlsx(path: pathlib.Path) -> None:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    ws.title = "Revenue"
    ws.append(["Month", "Revenue", "Ratio", "Date"])
    ws.append(["Jan", 1000, 0.1 + 0.2, dt.datetime(2024, 1, 31)])
    ws.append(["Feb", 3.0, None, dt.datetime(2024, 2, 29, 10, 30)])
    ws.cell(row=10, column=8, value=None)  # an empty cell that stretches the dimension
    wb.create_sheet("Empty")
    wb.properties.title = "Budget"
    wb.properties.creator = "Hopper"
    wb.save(path)


def biff2_xls(rows: list[list[object]]) -> bytes:
    """A minimal BIFF2 worksheet, which xlrd reads without an OLE2 container."""

    def rec(rid: int, data: bytes) -> bytes:
        return struct.pack("<HH", rid, len(data)) + data

    out = rec(0x0009, struct.pack("<HH", 0x0002, 0x0010))
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            head = struct.pack("<HH", r, c) + b"\x00\x00\x00"
            if isinstance(value, str):
                b = value.encode("latin-1")
                out += rec(0x0004, head + bytes([len(b)]) + b)
            else:
                out += rec(0x0003, head + struct.pack("<d", float(value)))
    return out + rec(0x000A, b"")


def make_ods(path: pathlib.Path) -> None:
    def cell(attrs: str = "", text: str = "") -> str:
        inner = f"<text:p>{text}</text:p>" if text else ""
        return f"<table:table-cell {attrs}>{inner}</table:table-cell>"

    def row(cells: str, attrs: str = "") -> str:
        return f"<table:table-row {attrs}>{cells}</table:table-row>"

    string = 'office:value-type="string"'
    rows = [
        row(
            cell(string, 'Item<text:s text:c="2"/>name')
            + cell(string, "Qty")
            + cell('table:number-columns-repeated="16000"')
        ),
        row(cell('table:number-columns-repeated="3"'), 'table:number-rows-repeated="2"'),
        row(
            cell(string, "Bolt")
            + cell('office:value-type="float" office:value="7"', "7")
            + cell('office:value-type="date" office:date-value="2024-03-01"', "01/03/24")
        ),
        # what LibreOffice writes to pad a sheet: must not become a million rows
        row(cell('table:number-columns-repeated="1024"'), 'table:number-rows-repeated="1048570"'),
    ]
    ns = " ".join(
        f'xmlns:{p}="urn:oasis:names:tc:opendocument:xmlns:{p}:1.0"'
        for p in ("office", "table", "text")
    )
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {ns}>'
        '<office:body><office:spreadsheet><table:table table:name="Stock">'
        + "".join(rows)
        + "</table:table></office:spreadsheet></office:body></office:document-content>"
    )
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("mimetype", "application/vnd.oasis.opendocument.spreadsheet")
        zf.writestr("content.xml", content)


def code_of(path: pathlib.Path) -> str:
    with pytest.raises(ParseError) as info:
        parse(path)
    assert info.value.message  # always a readable reason
    return info.value.code
