"""The test knowledge base generator writes what its EXPECTED_* constants promise."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

import docx
import openpyxl
import pptx
import pytest
from pypdf import PdfReader
from pypdf.generic import Destination

from tests.fixtures.knowledge_base import (
    EXPECTED_ABSENT,
    EXPECTED_EMPTY,
    EXPECTED_ENCODINGS,
    EXPECTED_FAILED,
    EXPECTED_FILES,
    EXPECTED_MATCHES,
    EXPECTED_METADATA,
    EXPECTED_MTIMES,
    EXPECTED_PAGE_TERMS,
    HUGE_TEXT_NEEDLE,
    KB_DIRNAME,
    ExpectedMatch,
    build_knowledge_base,
    expected_outlines,
)

HUGE_MB, ROWS = 1, 200
OUTLINES = expected_outlines(big_sheet_rows=ROWS)


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("kb")
    return build_knowledge_base(root, huge_mb=HUGE_MB, big_sheet_rows=ROWS)


def _of_type(kind: str) -> list[str]:
    return [path for path, outline in OUTLINES.items() if outline["type"] == kind]


def _squash(text: str) -> str:
    return " ".join(text.split())


def _flatten(outline: list[Any], reader: PdfReader, level: int = 0) -> list[dict[str, Any]]:
    """pypdf nests children as a list after their parent."""
    out: list[dict[str, Any]] = []
    for item in outline:
        if isinstance(item, list):
            out += _flatten(item, reader, level + 1)
        else:
            assert isinstance(item, Destination)
            page = reader.get_destination_page_number(item) + 1
            out.append({"title": item.title, "page": page, "level": level})
    return out


def _text(path: Path, rel: str) -> str:
    """Just enough extraction to check that a snippet really is in the file."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        return "\n".join(page.extract_text() for page in PdfReader(path).pages)
    if suffix == ".docx":
        document = docx.Document(str(path))
        cells = [c.text for t in document.tables for r in t.rows for c in r.cells]
        return "\n".join([p.text for p in document.paragraphs] + cells)
    if suffix == ".pptx":
        deck = pptx.Presentation(str(path))
        return "\n".join(
            shape.text_frame.text
            for slide in deck.slides
            for shape in slide.shapes
            if shape.has_text_frame
        )
    if suffix == ".xlsx":
        wb = openpyxl.load_workbook(path, read_only=True)
        return "\n".join(
            str(v) for ws in wb.worksheets for row in ws.iter_rows(values_only=True) for v in row
        )
    return path.read_bytes().decode(EXPECTED_ENCODINGS.get(rel, "utf-8"))


def test_every_file_is_written(kb: dict[str, Path]) -> None:
    assert tuple(kb) == EXPECTED_FILES
    for rel, path in kb.items():
        assert path.is_file(), rel
        assert path.as_posix().endswith(f"{KB_DIRNAME}/{rel}")
        assert (path.stat().st_size == 0) == (rel in EXPECTED_EMPTY), rel
        assert path.stat().st_mtime == EXPECTED_MTIMES[rel].timestamp(), rel
    assert (kb["test-edge-cases/huge_text.txt"]).stat().st_size >= HUGE_MB * 1024 * 1024


def test_gbk_file_is_not_utf8(kb: dict[str, Path]) -> None:
    raw = kb["Sales/市场分析_GBK.txt"].read_bytes()
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")
    assert "华东地区工业传感器市场" in raw.decode("gbk")


def test_corrupted_xlsx_is_not_a_zip(kb: dict[str, Path]) -> None:
    for rel in EXPECTED_FAILED:
        assert kb[rel].read_bytes().startswith(b"PK\x03\x04")  # looks like xlsx at first glance
        assert not zipfile.is_zipfile(kb[rel])


@pytest.mark.parametrize("rel", _of_type("pdf"))
def test_pdf_pages_bookmarks_and_metadata(kb: dict[str, Path], rel: str) -> None:
    expected = OUTLINES[rel]
    reader = PdfReader(kb[rel])
    assert len(reader.pages) == expected["total_pages"]
    assert _flatten(reader.outline, reader) == expected["bookmarks"]
    texts = [_squash(page.extract_text()).lower() for page in reader.pages]
    assert [n for n, t in enumerate(texts, 1) if not t] == expected["textless_pages"]
    for term, pages in EXPECTED_PAGE_TERMS[rel].items():
        assert [n for n, t in enumerate(texts, 1) if term in t] == pages, term
    assert reader.metadata is not None
    assert reader.metadata.title == EXPECTED_METADATA[rel]["title"]
    assert reader.metadata.author == EXPECTED_METADATA[rel]["author"]
    assert reader.metadata.creation_date == EXPECTED_METADATA[rel]["created"]


def test_seed_004_page_requirements() -> None:
    terms = EXPECTED_PAGE_TERMS["Legal/Acme_Vendor_Agreement.pdf"]
    assert terms["limitation of liability"] == [12, 13, 14]
    assert terms["legal@acme-corp.com"] == terms["procurement@example.com"] == [5]
    assert OUTLINES["test-edge-cases/single_page.pdf"]["total_pages"] == 1
    assert OUTLINES["Finance/Annual_Report_2024.pdf"]["total_pages"] >= 15
    assert OUTLINES["Finance/Annual_Report_2024.pdf"]["bookmarks"][0] == {
        "title": "Executive Summary",
        "page": 1,
        "level": 0,
    }


@pytest.mark.parametrize("rel", _of_type("xlsx"))
def test_xlsx_sheets(kb: dict[str, Path], rel: str) -> None:
    wb = openpyxl.load_workbook(kb[rel], read_only=True)
    sheets = []
    for ws in wb.worksheets:
        rows = [r for r in ws.iter_rows(values_only=True) if any(v is not None for v in r)]
        width = max((len(r) for r in rows), default=0)
        sheets.append({"name": ws.title, "rows": len(rows), "columns": width})
    assert sheets == OUTLINES[rel]["sheets"]
    assert wb.properties.title == EXPECTED_METADATA[rel]["title"]


def test_q1_budget_summary_has_revenue(kb: dict[str, Path]) -> None:
    wb = openpyxl.load_workbook(kb["Finance/2024/Q1/Q1_Budget.xlsx"], read_only=True)
    rows = list(wb["Summary"].iter_rows(values_only=True))
    revenue = next(r for r in rows if r[0] == "Revenue")
    assert revenue[2] == 1234567
    assert any("$1,234,567" in str(v) for v in revenue)


@pytest.mark.parametrize("rel", _of_type("pptx"))
def test_pptx_slides(kb: dict[str, Path], rel: str) -> None:
    deck = pptx.Presentation(str(kb[rel]))
    slides = list(deck.slides)
    titles = [s.shapes.title.text if s.shapes.title is not None else None for s in slides]
    with_notes = [
        n
        for n, s in enumerate(slides, 1)
        if s.has_notes_slide and s.notes_slide.notes_text_frame.text
    ]
    assert len(slides) == OUTLINES[rel]["total_slides"]
    assert titles == OUTLINES[rel]["titles"]
    assert with_notes == OUTLINES[rel]["slides_with_notes"]
    assert deck.core_properties.title == EXPECTED_METADATA[rel]["title"]


@pytest.mark.parametrize("rel", _of_type("docx"))
def test_docx_structure(kb: dict[str, Path], rel: str) -> None:
    document = docx.Document(str(kb[rel]))
    headings = [
        (int(p.style.name.removeprefix("Heading ")), p.text)
        for p in document.paragraphs
        if p.style is not None and p.style.name.startswith("Heading ")
    ]
    body = document.element.body.xml
    assert headings == OUTLINES[rel]["headings"]
    assert len(document.tables) == OUTLINES[rel]["tables"]
    assert body.count('w:type="page"') == OUTLINES[rel]["explicit_page_breaks"]
    assert document.core_properties.title == EXPECTED_METADATA[rel]["title"]


@pytest.mark.parametrize("rel", _of_type("md"))
def test_markdown_headings_skip_code_blocks(kb: dict[str, Path], rel: str) -> None:
    headings, fenced = [], False
    for line in kb[rel].read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"(#{1,6}) (.+)", line)):
            headings.append((len(m.group(1)), m.group(2)))
    assert headings == OUTLINES[rel]["headings"]


def test_readme_has_a_fake_heading_in_code(kb: dict[str, Path]) -> None:
    text = kb["Engineering/README.md"].read_text(encoding="utf-8")
    assert "\n# not a heading" in text
    assert {level for level, _ in OUTLINES["Engineering/README.md"]["headings"]} == {1, 2, 3}


def test_html_sentinels_are_only_in_script_style_or_comments(kb: dict[str, Path]) -> None:
    html = kb["Engineering/API_Spec.html"].read_text(encoding="utf-8")
    visible = re.sub(r"<(script|style)\b.*?</\1>|<!--.*?-->", "", html, flags=re.S)
    headings = [(int(m[0]), m[1]) for m in re.findall(r"<h([1-6])>(.*?)</h\1>", html)]
    assert headings == OUTLINES["Engineering/API_Spec.html"]["headings"]
    for sentinel in EXPECTED_ABSENT["Engineering/API_Spec.html"]:
        assert sentinel in html
        assert sentinel not in visible


@pytest.mark.parametrize("match", EXPECTED_MATCHES, ids=lambda m: m.query)
def test_expected_matches_are_in_their_files(kb: dict[str, Path], match: ExpectedMatch) -> None:
    assert _squash(match.snippet) in _squash(_text(kb[match.path], match.path))


def test_huge_text_has_one_needle(kb: dict[str, Path]) -> None:
    assert kb["test-edge-cases/huge_text.txt"].read_text("ascii").count(HUGE_TEXT_NEEDLE) == 1


def test_csv_shape(kb: dict[str, Path]) -> None:
    lines = kb["Sales/Customer_List.csv"].read_text(encoding="utf-8").splitlines()
    assert len(lines) == OUTLINES["Sales/Customer_List.csv"]["rows"] == 11
    assert sum("@" in line for line in lines) == 10


def test_outlines_follow_the_build_parameters() -> None:
    details = expected_outlines(big_sheet_rows=7)["Finance/2024/Q1/Q1_Budget.xlsx"]["sheets"]
    assert details == [
        {"name": "Summary", "rows": 50, "columns": 6},
        {"name": "Details", "rows": 8, "columns": 7},
        {"name": "Charts", "rows": 0, "columns": 0},
    ]


def test_second_build_is_byte_identical(
    kb: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    again = build_knowledge_base(
        tmp_path_factory.mktemp("kb-again"), huge_mb=HUGE_MB, big_sheet_rows=ROWS
    )
    # bytes, not just text: also covers .md/.txt/.csv content and the zip/PDF packaging
    for rel, path in kb.items():
        assert again[rel].read_bytes() == path.read_bytes(), rel
