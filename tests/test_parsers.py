"""Document parsers on small real files generated in tmp_path (no database needed)."""

from __future__ import annotations

import datetime as dt
import io
import os
import pathlib
import shutil
import stat
import struct
import sys
import zipfile

import pytest

from pgrag.errors import ErrorCode
from pgrag.ingest.parsers import SUPPORTED_EXTENSIONS, ParseError, parse

# ---------------------------------------------------------------- builders


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


# ---------------------------------------------------------------- PDF


def test_pdf_pages_bookmarks_and_metadata(tmp_path):
    path = tmp_path / "report.pdf"
    make_pdf(path)
    doc = parse(path)
    assert doc.file_type == "pdf"
    assert [(u.kind, u.number) for u in doc.units] == [("page", 1), ("page", 2), ("page", 3)]
    assert "Financial Overview on page 2" in doc.units[1].body
    assert doc.outline == {
        "type": "pdf",
        "total_pages": 3,
        "bookmarks": [
            {"title": "Introduction", "page": 1, "level": 1},
            {"title": "Financial Overview", "page": 2, "level": 1},
            {"title": "Revenue Details", "page": 3, "level": 2},
        ],
    }
    assert (doc.title, doc.author) == ("Annual Report", "Ada")
    assert doc.created is not None and doc.created.tzinfo is not None
    assert abs(doc.created - dt.datetime.now(dt.UTC)) < dt.timedelta(days=2)


def test_pdf_date_strings():
    from pgrag.ingest.parsers.pdf import parse_pdf_date

    assert parse_pdf_date("D:20240131123000+02'00'") == dt.datetime(
        2024, 1, 31, 10, 30, tzinfo=dt.UTC
    )
    assert parse_pdf_date("D:20240131123000Z") == dt.datetime(2024, 1, 31, 12, 30, tzinfo=dt.UTC)
    assert parse_pdf_date("20240131") == dt.datetime(2024, 1, 31, tzinfo=dt.UTC)
    assert parse_pdf_date("D:2024") == dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    assert parse_pdf_date("D:20241399") is None  # month 13
    assert parse_pdf_date("yesterday") is None
    assert parse_pdf_date(None) is None


def test_pdf_encryption(tmp_path):
    from pypdf import PdfReader, PdfWriter

    plain = tmp_path / "plain.pdf"
    make_pdf(plain)
    for name, user_password in (("locked.pdf", "secret"), ("owner_only.pdf", "")):
        writer = PdfWriter(clone_from=PdfReader(plain))
        writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
        writer.write(tmp_path / name)
    assert code_of(tmp_path / "locked.pdf") == ErrorCode.ENCRYPTED
    opened = parse(tmp_path / "owner_only.pdf")  # empty user password: readable
    assert "Introduction on page 1" in opened.units[0].body


def test_pdf_corrupt_and_empty(tmp_path):
    (tmp_path / "junk.pdf").write_bytes(os.urandom(2048))
    (tmp_path / "empty.pdf").write_bytes(b"")
    assert code_of(tmp_path / "junk.pdf") == ErrorCode.CORRUPT_FILE
    assert code_of(tmp_path / "empty.pdf") == ErrorCode.CORRUPT_FILE


# ---------------------------------------------------------------- DOCX


def test_docx_sections_tables_pages(tmp_path):
    path = tmp_path / "contract.docx"
    make_docx(path)
    doc = parse(path)
    assert doc.file_type == "docx"
    assert [(u.kind, u.title) for u in doc.units] == [
        ("section", None),
        ("section", "Chapter One"),
        ("section", "Chapter Two"),
    ]
    assert doc.units[0].body == "Preamble before any heading."
    one = doc.units[1].body
    # document order: paragraph, table rows, paragraph
    assert one.index("First chapter text.") < one.index("a | b | c") < one.index("After the table.")
    assert "\n1 | 2 | 3\n" in one
    assert doc.units[1].meta["level"] == 1 and doc.units[1].meta["page"] == 1
    assert doc.units[2].meta["level"] == 2 and doc.units[2].meta["page"] == 2
    assert doc.outline == {
        "type": "docx",
        "headings": [
            {"title": "Chapter One", "level": 1, "page": 1},
            {"title": "Chapter Two", "level": 2, "page": 2},
        ],
        "total_pages": 2,
        "pages_estimated": False,
    }
    assert (doc.title, doc.author) == ("Supply Contract", "Grace")
    assert doc.modified is not None and doc.modified.tzinfo is not None

    from pgrag.ingest.parsers.docx import page_texts

    pages = page_texts(doc.units)
    assert [p for p, _ in pages] == [1, 2]
    assert pages[0][1].endswith("After the table.")
    assert pages[1][1].startswith("Chapter Two")


def test_docx_without_breaks_has_unknown_pages(tmp_path):
    path = tmp_path / "nobreaks.docx"
    make_docx(path, page_break=False)
    doc = parse(path)
    assert doc.outline["pages_estimated"] is True
    assert doc.outline["total_pages"] is None
    assert all(u.meta["page"] is None for u in doc.units)


def test_docx_rendered_breaks_are_not_double_counted(tmp_path):
    """Word writes a rendered break after each hard break; both mean one new page."""
    import docx
    from docx.oxml import OxmlElement

    path = tmp_path / "rendered.docx"
    d = make_docx(path)  # one hard break before "Chapter Two"
    heading = next(p for p in d.paragraphs if p.text == "Chapter Two")
    heading.runs[0]._r.insert(0, OxmlElement("w:lastRenderedPageBreak"))
    later = d.add_paragraph("Long text ")
    later.add_run("continues on page three.")._r.insert(0, OxmlElement("w:lastRenderedPageBreak"))
    row = d.add_table(rows=1, cols=2).rows[0]  # a row going on to page four: one break per cell
    for cell in row.cells:
        cell.paragraphs[0].add_run("cell")._r.insert(0, OxmlElement("w:lastRenderedPageBreak"))
    d.save(str(path))
    doc = parse(path)
    assert docx.Document(str(path)).element.body.xpath(".//w:br[@w:type='page']")
    assert doc.outline["total_pages"] == 4
    assert doc.units[2].meta["page"] == 2
    body = doc.units[2].body
    starts = doc.units[2].meta["page_starts"]
    assert [page for _, page in starts] == [2, 3, 4]
    assert body[starts[1][0] : starts[2][0]].strip() == "continues on page three."
    assert body[starts[2][0] :] == "cell | cell"


def test_docx_corrupt(tmp_path):
    good = tmp_path / "good.docx"
    make_docx(good)
    data = good.read_bytes()
    (tmp_path / "truncated.docx").write_bytes(data[: len(data) // 2])
    (tmp_path / "empty.docx").write_bytes(b"")
    assert code_of(tmp_path / "truncated.docx") == ErrorCode.CORRUPT_FILE
    assert code_of(tmp_path / "empty.docx") == ErrorCode.CORRUPT_FILE


# ---------------------------------------------------------------- PPTX


def test_pptx_slides_notes_tables(tmp_path):
    path = tmp_path / "review.pptx"
    make_pptx(path)
    doc = parse(path)
    assert doc.file_type == "pptx"
    first, second = doc.units
    assert (first.kind, first.number, first.title) == ("slide", 1, "Q4 Business Review")
    assert first.body == (
        "Q4 Business Review\nRevenue grew 12%\n\nNotes: Mention the churn numbers"
    )
    assert first.meta == {
        "title": "Q4 Business Review",
        "notes": "Mention the churn numbers",
        "body_text": "Revenue grew 12%",
    }
    assert second.title is None
    assert second.body == "Agenda\nRegion | Sales\nEU | 42"
    assert second.meta["notes"] is None
    assert doc.outline == {
        "type": "pptx",
        "total_slides": 2,
        "slides": [{"number": 1, "title": "Q4 Business Review"}, {"number": 2, "title": None}],
    }
    assert (doc.title, doc.author) == ("Q4 Review", "Linus")


# ---------------------------------------------------------------- spreadsheets


def test_xlsx_sheets_rows_and_offsets(tmp_path):
    path = tmp_path / "budget.xlsx"
    make_xlsx(path)
    doc = parse(path)
    revenue, empty = doc.units
    assert (revenue.kind, revenue.title, empty.title) == ("sheet", "Revenue", "Empty")
    assert revenue.rows == [
        ["Month", "Revenue", "Ratio", "Date"],
        ["Jan", "1000", "0.3", "2024-01-31"],
        ["Feb", "3", "", "2024-02-29T10:30:00"],
    ]
    assert revenue.meta == {
        "rows": 3,
        "columns": 4,
        "header": ["Month", "Revenue", "Ratio", "Date"],
        "dimension": "A1:D3",
    }
    assert revenue.body.split("\n")[2] == "Feb | 3 |  | 2024-02-29T10:30:00"
    for i, row in enumerate(revenue.rows):
        assert revenue.body[revenue.row_offsets[i] :].startswith(row[0] + " | " + row[1])
    assert (empty.rows, empty.body, empty.meta["rows"], empty.meta["columns"]) == ([], "", 0, 0)
    assert doc.outline == {
        "type": "xlsx",
        "sheets": [
            {"name": "Revenue", "rows": 3, "columns": 4},
            {"name": "Empty", "rows": 0, "columns": 0},
        ],
        "total_rows": 3,
    }
    assert (doc.title, doc.author) == ("Budget", "Hopper")


def test_xlsx_unsized_5200_rows(tmp_path):
    from openpyxl import Workbook

    path = tmp_path / "big.xlsx"
    wb = Workbook(write_only=True)  # no <dimension>: "Worksheet is unsized" on read
    ws = wb.create_sheet("Log")
    ws.append([])  # leading empty row keeps row numbers aligned
    ws.append(["id", "value", "note"])
    for i in range(5200):
        ws.append([i, i * 1.5, None if i % 2 else f"row {i}"])
    wb.save(path)
    (sheet,) = parse(path).units
    assert sheet.meta["rows"] == 5202 and sheet.meta["columns"] == 3
    assert sheet.rows[0] == ["", "", ""] and sheet.meta["header"] == ["", "", ""]
    assert sheet.rows[-1] == ["5199", "7798.5", ""]
    assert sheet.meta["dimension"] == "A1:C5202"
    assert sheet.body[sheet.row_offsets[-1] :] == "5199 | 7798.5"
    assert sheet.body[sheet.row_offsets[1000] :].startswith("998 | 1497 | row 998\n")


def test_xlsx_corrupt(tmp_path):
    good = tmp_path / "good.xlsx"
    make_xlsx(good)
    data = good.read_bytes()
    (tmp_path / "random.xlsx").write_bytes(os.urandom(4096))
    (tmp_path / "truncated.xlsx").write_bytes(data[: len(data) // 2])
    (tmp_path / "empty.xlsx").write_bytes(b"")
    (tmp_path / "notes.xlsx").write_text("not a spreadsheet")
    for name in ("random.xlsx", "truncated.xlsx", "empty.xlsx", "notes.xlsx"):
        assert code_of(tmp_path / name) == ErrorCode.CORRUPT_FILE, name


def test_xls_via_xlrd(tmp_path):
    path = tmp_path / "legacy.xls"
    path.write_bytes(biff2_xls([["Name", "Qty"], ["Apple", 3], ["Pear", 2.5]]))
    doc = parse(path)
    assert doc.file_type == "xls" and doc.outline["type"] == "xls"
    assert doc.units[0].rows == [["Name", "Qty"], ["Apple", "3"], ["Pear", "2.5"]]
    renamed = tmp_path / "really_xlsx.xls"  # an .xlsx saved under the old extension
    make_xlsx(renamed)
    assert parse(renamed).units[0].title == "Revenue"


def test_ods_repeated_cells_are_not_materialised(tmp_path):
    path = tmp_path / "stock.ods"
    make_ods(path)
    doc = parse(path)
    (sheet,) = doc.units
    assert sheet.title == "Stock"
    assert sheet.rows == [
        ["Item  name", "Qty", ""],
        ["", "", ""],
        ["", "", ""],
        ["Bolt", "7", "2024-03-01"],
    ]
    assert doc.outline["sheets"] == [{"name": "Stock", "rows": 4, "columns": 3}]


def test_csv_semicolon_utf8_bom(tmp_path):
    path = tmp_path / "customers.csv"
    path.write_bytes("name;city;amount\nZoë;Köln;1.234\nLi;Paris;7\n".encode("utf-8-sig"))
    doc = parse(path)
    (sheet,) = doc.units
    assert sheet.title is None and sheet.meta["implicit"] is True
    assert sheet.rows[0] == ["name", "city", "amount"]  # no BOM glued to the first cell
    assert sheet.rows[1] == ["Zoë", "Köln", "1.234"]
    assert doc.outline == {"type": "csv", "rows": 3, "columns": 3, "delimiter": ";"}
    assert sheet.body[sheet.row_offsets[2] :] == "Li | Paris | 7"


def test_csv_gbk_and_tsv(tmp_path):
    gbk = tmp_path / "销售.csv"
    gbk.write_bytes("产品,数量,地区\n苹果,10,北京\n香蕉,20,上海\n".encode("gbk"))
    sheet = parse(gbk).units[0]
    assert sheet.rows == [["产品", "数量", "地区"], ["苹果", "10", "北京"], ["香蕉", "20", "上海"]]
    tsv = tmp_path / "data.tsv"
    tsv.write_text("a,b\tc\n1\t2\n", encoding="utf-8")
    doc = parse(tsv)
    assert doc.units[0].rows == [["a,b", "c"], ["1", "2"]]
    assert doc.outline["delimiter"] == "\t" and doc.file_type == "tsv"


def test_empty_csv(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_bytes(b"")
    (sheet,) = parse(path).units
    assert (sheet.rows, sheet.body, sheet.row_offsets) == ([], "", [])


# ---------------------------------------------------------------- text, markdown


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("中文文本测试。数据库与检索。".encode("gbk"), "中文文本测试。数据库与检索。"),
        ("数据库".encode("gbk"), "数据库"),  # too short for statistics: GB preferred
        ("Grüße aus Köln".encode("utf-16"), "Grüße aus Köln"),  # with BOM
        ("\ufeffplain utf-8 with BOM".encode(), "plain utf-8 with BOM"),
        ("naïve café".encode(), "naïve café"),
        (b"line one\r\nline two\r\n", "line one\nline two"),
    ],
)
def test_txt_encodings(tmp_path, data, expected):
    path = tmp_path / "sample.txt"
    path.write_bytes(data)
    doc = parse(path)
    assert doc.units[0].body == expected


def test_txt_empty_and_unicode_name(tmp_path):
    path = tmp_path / "special_chars_文件名_ü.txt"
    path.write_bytes(b"")
    doc = parse(path)
    assert doc.file_type == "txt"
    assert [(u.kind, u.number, u.body) for u in doc.units] == [("page", 1, "")]
    assert doc.title is None


@pytest.mark.parametrize("ext", ["txt", "md", "csv", "tsv", "html", "xml"])
def test_empty_text_types_give_one_empty_unit(tmp_path, ext):
    path = tmp_path / f"empty.{ext}"
    path.write_bytes(b"")
    doc = parse(path)
    assert doc.file_type == ext
    assert [u.body for u in doc.units] == [""]
    assert doc.text == ""


def test_txt_large_file_is_paged_linearly(tmp_path):
    paragraph = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 6).strip()
    paragraphs = [f"{i}: {paragraph}" for i in range(30_000)]  # ~10 MB
    path = tmp_path / "huge.txt"
    path.write_text("\n\n".join(paragraphs), encoding="utf-8")
    doc = parse(path)
    assert 3000 < len(doc.units) < 4500
    assert all(len(u.body) <= 3000 for u in doc.units)
    assert doc.units[0].body.startswith("0: Lorem") and doc.units[-1].body.endswith("elit.")
    # cut at paragraph boundaries: every page starts with a paragraph number
    assert all(u.body.split(":", 1)[0].isdigit() for u in doc.units)
    assert doc.outline["total_pages"] == len(doc.units)
    assert doc.outline["pages_estimated"] is True
    assert doc.outline["lines"] == 2 * 30_000 - 1
    assert sum(len(u.body) for u in doc.units) + 2 * (len(doc.units) - 1) == path.stat().st_size


def test_markdown_sections(tmp_path):
    path = tmp_path / "guide.md"
    path.write_text(
        "---\ntitle: Front Title\n---\nIntro line.\n\n"
        "# Guide\n\nText.\n\n```python\n# not a heading\n```\n\n"
        "Setext Two\n----------\n\nMore.\n\n### Deep ###\n\nEnd.\n",
        encoding="utf-8",
    )
    doc = parse(path)
    assert [(u.title, u.meta["level"]) for u in doc.units] == [
        (None, None),
        ("Guide", 1),
        ("Setext Two", 2),
        ("Deep", 3),
    ]
    assert "# not a heading" in doc.units[1].body
    assert doc.units[2].body == "Setext Two\n----------\n\nMore."
    assert doc.title == "Guide"
    assert doc.outline == {
        "type": "md",
        "headings": [
            {"title": "Guide", "level": 1},
            {"title": "Setext Two", "level": 2},
            {"title": "Deep", "level": 3},
        ],
    }


# ---------------------------------------------------------------- HTML, XML


def test_html_visible_text_sections(tmp_path):
    path = tmp_path / "page.html"
    path.write_text(
        "<html><head><title>Remote Work Policy</title><meta name='author' content='HR Team'>"
        "<style>body{color:red}</style></head><body>"
        "<script>var secret = 1;</script><noscript>enable js</noscript>"
        "<p>Intro <b>bold</b> text</p><h1>Eligibility</h1><p>All staff.</p><div>Line two</div>"
        "<h2>Equipment</h2><table><tr><th>Item</th><th>Budget</th></tr>"
        "<tr><td>Laptop</td><td>1500</td></tr></table><!-- a comment --></body></html>",
        encoding="utf-8",
    )
    doc = parse(path)
    assert (doc.title, doc.author) == ("Remote Work Policy", "HR Team")
    assert [(u.title, u.meta["level"]) for u in doc.units] == [
        (None, None),
        ("Eligibility", 1),
        ("Equipment", 2),
    ]
    assert doc.units[0].body == "Intro bold text"
    assert doc.units[1].body == "Eligibility\nAll staff.\nLine two"
    assert doc.units[2].body == "Equipment\nItem | Budget\nLaptop | 1500"
    for hidden in ("secret", "color", "enable js", "comment"):
        assert hidden not in doc.text
    assert doc.outline["headings"] == [
        {"title": "Eligibility", "level": 1},
        {"title": "Equipment", "level": 2},
    ]


def test_xml_no_external_entities(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    path = tmp_path / "feed.xml"
    path.write_text(
        f'<?xml version="1.0"?>\n<!DOCTYPE catalog [<!ENTITY xxe SYSTEM "{secret.as_uri()}">]>\n'
        "<catalog><title>Parts</title><item><name>Bolt &xxe;</name></item>"
        "<item><name>Nut</name></item></catalog>",
        encoding="utf-8",
    )
    doc = parse(path)
    assert "TOPSECRET" not in doc.text
    assert doc.units[0].body == "Parts\nBolt\nNut"
    assert doc.title == "Parts"
    assert doc.outline == {
        "type": "xml",
        "root": "catalog",
        "elements": [
            {"path": "/catalog", "count": 1},
            {"path": "/catalog/title", "count": 1},
            {"path": "/catalog/item", "count": 2},
            {"path": "/catalog/item/name", "count": 2},
        ],
    }
    (tmp_path / "broken.xml").write_text("<a><b></a>")
    assert code_of(tmp_path / "broken.xml") == ErrorCode.CORRUPT_FILE


# ---------------------------------------------------------------- dispatcher, legacy


def test_unsupported_and_unreadable(tmp_path):
    (tmp_path / "tool.exe").write_bytes(b"MZ")
    (tmp_path / "Makefile").write_text("all:")
    assert code_of(tmp_path / "tool.exe") == ErrorCode.UNSUPPORTED_FORMAT
    assert code_of(tmp_path / "Makefile") == ErrorCode.UNSUPPORTED_FORMAT
    assert code_of(tmp_path / "missing.pdf") == ErrorCode.UNREADABLE
    assert {
        "pdf",
        "docx",
        "xlsx",
        "pptx",
        "csv",
        "txt",
        "md",
        "html",
        "xml",
    } <= SUPPORTED_EXTENSIONS
    upper = tmp_path / "NOTES.TXT"
    upper.write_text("shouting")
    assert parse(upper).file_type == "txt"


def test_legacy_without_libreoffice(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    path = tmp_path / "old.doc"
    path.write_bytes(b"\xd0\xcf\x11\xe0 not really a doc")
    with pytest.raises(ParseError) as info:
        parse(path)
    assert info.value.code == ErrorCode.UNSUPPORTED_FORMAT
    assert "LibreOffice" in info.value.message and ".doc" in info.value.message


def test_legacy_conversion_with_fake_soffice(tmp_path, monkeypatch):
    """The conversion path with a stand-in `soffice` that 'converts' by copying a docx."""
    converted = tmp_path / "prepared.docx"
    make_docx(converted)
    fake = tmp_path / "soffice"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import pathlib, shutil, sys\n"
        "args = sys.argv[1:]\n"
        "out = pathlib.Path(args[args.index('--outdir') + 1])\n"
        "out.mkdir(parents=True, exist_ok=True)\n"
        "target = args[args.index('--convert-to') + 1]\n"
        f"shutil.copy({str(converted)!r}, out / (pathlib.Path(args[-1]).stem + '.' + target))\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(shutil, "which", lambda name: str(fake) if name == "soffice" else None)
    path = tmp_path / "合同.doc"
    path.write_bytes(b"\xd0\xcf\x11\xe0 legacy bytes")
    doc = parse(path)
    assert doc.file_type == "doc" and doc.outline["type"] == "doc"
    assert [u.title for u in doc.units] == [None, "Chapter One", "Chapter Two"]
    assert doc.metadata["converted_with"] == "libreoffice"


def test_legacy_conversion_failure_is_corrupt_file(tmp_path, monkeypatch):
    fake = tmp_path / "soffice"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "sys.stderr.write('Error: source file could not be loaded')\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(shutil, "which", lambda name: str(fake) if name == "soffice" else None)
    path = tmp_path / "deck.ppt"
    path.write_bytes(b"junk")
    with pytest.raises(ParseError) as info:
        parse(path)
    assert info.value.code == ErrorCode.CORRUPT_FILE
    assert "could not be loaded" in info.value.message


def test_errors_are_never_raw(tmp_path):
    """Garbage under every binary extension is a ParseError, never a library traceback."""
    garbage = io.BytesIO(os.urandom(3000)).getvalue()
    for ext in ("pdf", "docx", "pptx", "xlsx", "xls", "ods"):
        path = tmp_path / f"garbage.{ext}"
        path.write_bytes(garbage)
        assert code_of(path) == ErrorCode.CORRUPT_FILE, ext
