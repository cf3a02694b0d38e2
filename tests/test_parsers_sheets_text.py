"""Parsing spreadsheets, text, markdown, HTML and XML, and the legacy formats."""

from __future__ import annotations

import io
import os
import shutil
import stat
import sys

import pytest

from pgrag.errors import ErrorCode
from pgrag.ingest.parsers import SUPPORTED_EXTENSIONS, ParseError, parse
from tests.support.parsers import biff2_xls, code_of, make_docx, make_ods, make_xlsx


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
