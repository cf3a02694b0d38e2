"""Document parsers on small real files generated in tmp_path (no database needed)."""

from __future__ import annotations

import datetime as dt
import os

from pgrag.errors import ErrorCode
from pgrag.ingest.parsers import parse
from tests.support.parsers import code_of, make_docx, make_pdf, make_pptx


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
