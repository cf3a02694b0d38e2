"""What a chunk carries besides its own text: the document title and the heading path of
its section (nested headings, PDF bookmarks), so that a chunk from deep inside a document
still says where it is, to BM25 (weighted A) and to the embedding model alike."""

from __future__ import annotations

import pathlib

from pgrag.ingest.parsers import parse
from pgrag.ingest.parsers.base import ParsedDocument, Unit
from pgrag.ingest.prepare import build_chunks, page_paths, section_paths
from tests.support.parsers import make_docx, make_pdf


def section(title: str | None, level: int | None) -> Unit:
    return Unit(kind="section", number=1, body="text", title=title, meta={"level": level})


def page(number: int) -> Unit:
    return Unit(kind="page", number=number, body=f"page {number} text")


def test_a_section_carries_the_titles_of_the_sections_around_it() -> None:
    units = [
        section(None, None),  # preamble
        section("1. Scope", 1),
        section("1.1 Definitions", 2),
        section("1.1.1 Goods", 3),
        section("1.2 Orders", 2),
        section("2. Prices", 1),
        section("Appendix", 1),
    ]
    assert section_paths(units) == [
        [],
        ["1. Scope"],
        ["1. Scope", "1.1 Definitions"],
        ["1. Scope", "1.1 Definitions", "1.1.1 Goods"],
        ["1. Scope", "1.2 Orders"],
        ["2. Prices"],
        ["Appendix"],
    ]


def test_a_pdf_page_carries_the_bookmarks_in_effect_and_those_starting_on_it() -> None:
    units = [page(n) for n in range(1, 6)]
    marks = [
        {"title": "1. Travel", "page": 1, "level": 1},
        {"title": "1.1 Flights", "page": 2, "level": 2},
        {"title": "1.2 Hotels", "page": 2, "level": 2},
        {"title": "2. Claims", "page": 4, "level": 1},
        {"title": "dangling", "page": None, "level": 1},
    ]
    assert page_paths(units, marks) == [
        ["1. Travel"],
        ["1. Travel", "1.1 Flights; 1.2 Hotels"],
        ["1. Travel", "1.2 Hotels"],  # no bookmark starts here: the one in effect
        ["2. Claims"],
        ["2. Claims"],
    ]


def test_chunk_headings_join_title_and_path_without_repeating_the_title() -> None:
    doc = ParsedDocument(
        file_type="md",
        units=[section("Guide", 1), section("Install", 2), section("Linux", 3)],
        title="Guide",
    )
    headings = [c.heading for c in build_chunks(doc, "Guide", 350, 40)]
    assert headings == ["Guide", "Guide / Install", "Guide / Install / Linux"]


def test_docx_and_pdf_chunks_carry_their_heading_paths(tmp_path: pathlib.Path) -> None:
    make_docx(tmp_path / "c.docx")
    doc = parse(tmp_path / "c.docx")
    headings = {c.heading for c in build_chunks(doc, doc.title or "c", 350, 40)}
    # Chapter Two is a level-2 heading under Chapter One
    assert "Supply Contract / Chapter One / Chapter Two" in headings
    make_pdf(tmp_path / "p.pdf")
    pdf = parse(tmp_path / "p.pdf")
    marks = [b for b in pdf.outline["bookmarks"] if b["page"]]
    assert marks, "the fixture PDF has bookmarks"
    chunks = build_chunks(pdf, "Report", 350, 40)
    first = next(c for c in chunks if c.page == marks[0]["page"])
    assert first.heading is not None and marks[0]["title"] in first.heading
