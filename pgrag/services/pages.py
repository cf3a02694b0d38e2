"""Reading a document's stored units: its text by section, its pages, sheet rows and slides.

Everything comes from Postgres (units, sheet_rows, the cached outline); no file is re-read.
Word-like files are stored as sections with their page starts, cut into pages here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import psycopg
from psycopg_pool import AsyncConnectionPool

from pgrag.db.scope import scoped_connection
from pgrag.errors import InvalidArgument
from pgrag.ingest.parsers.base import Unit, UnitKind
from pgrag.ingest.parsers.docx import page_texts
from pgrag.services import documents as docs
from pgrag.services.ranges import parse_number_list
from pgrag.store import pages as store
from pgrag.store.rows import UnitRow
from pgrag.tokens import count_tokens_many

PAGED_BY_SECTION = ("docx", "doc", "odt", "rtf")  # pages cut from sections at page starts
SHEET_ROWS_PER_READ = 2000  # a page of rows never needs more (the token budget cuts first)
HEADER_ROW = 1
TEXT_PIECE_CHARS = 4000  # at most ~16k tokens, whatever the script: one piece fits a page
BREAK_SPAN = 200  # characters searched back from a piece's end for a line or word break
MIN_WINDOW = 1000  # tokens: a page of a wide sheet shows at least this much of its columns
CELL_OVERHEAD_TOKENS = 2  # a cell's quotes and separator in the JSON an agent reads


@dataclass(frozen=True)
class PageSelection:
    doc: docs.DocumentRef
    pages: list[tuple[int, str]]  # (page number, text) of the wanted pages
    total: int  # pages of the whole document


@dataclass(frozen=True)
class SheetSlice:
    """Rows of one sheet from `first_row` on, cut to a window of the asked columns."""

    doc: docs.DocumentRef
    sheet_name: str | None
    headers: list[str]
    rows: list[list[str]]
    first_row: int
    first_column: int  # sheet column (1-based) of headers[0] and of each row's first cell
    width: int  # columns of the window
    more_columns: bool  # the range goes on right of the window
    remaining: int  # rows of the asked range, counted from its first row
    total_rows: int
    columns: int
    available_sheets: list[str]


@dataclass(frozen=True)
class Slide:
    number: int
    title: str | None
    content: str
    notes: str | None


@dataclass(frozen=True)
class SlideSelection:
    doc: docs.DocumentRef
    slides: list[Slide]
    total: int


async def ready_document(
    conn: psycopg.AsyncConnection, ref: str, scope: list[str] | None
) -> docs.DocumentRef:
    """The document the caller names, visible under its scope and fully ingested."""
    doc = await docs.resolve(conn, ref, scope)
    docs.require_ready(doc)
    return doc


async def section_texts(
    pool: AsyncConnectionPool, scope: list[str] | None, ref: str, section: str | None
) -> tuple[docs.DocumentRef, list[str]]:
    """A ready document's unit bodies in order; only the section titled `section` (any
    case) when given."""
    async with scoped_connection(pool, scope) as conn:
        doc = await ready_document(conn, ref, scope)
        units = await store.units(conn, doc.id)
    if section is not None:
        wanted = section.strip().lower()
        units = [u for u in units if (u.title or "").strip().lower() == wanted]
        if not units:
            raise InvalidArgument(
                f"no section '{section}' in this document: see get_document_outline",
                detail={"field": "section"},
            )
    return doc, [u.body for u in units]


@dataclass(frozen=True)
class TextPiece:
    """Part of a unit's text: a page of text is a run of pieces, so a unit larger than
    any budget (a whole sheet's text, a markdown file without headings) still pages."""

    text: str
    joiner: str  # what goes before it: nothing inside a unit, a blank line between units


def text_pieces(texts: list[str], size: int = TEXT_PIECE_CHARS) -> list[TextPiece]:
    pieces: list[TextPiece] = []
    for i, text in enumerate(texts):
        for k, piece in enumerate(_split(text, size)):
            pieces.append(TextPiece(piece, "" if k else "\n\n" if i else ""))
    return pieces


def join_pieces(pieces: list[TextPiece]) -> str:
    """The text of a run of pieces (a page starts without its first joiner)."""
    return "".join((p.joiner if i else "") + p.text for i, p in enumerate(pieces))


def _split(text: str, size: int) -> list[str]:
    """`text` in pieces of at most `size` characters, ending at a line or word break when
    one is near."""
    out: list[str] = []
    start = 0
    while True:
        end = start + size
        if end >= len(text):
            out.append(text[start:])
            return out
        brk = max(text.rfind("\n", end - BREAK_SPAN, end), text.rfind(" ", end - BREAK_SPAN, end))
        end = brk + 1 if brk > start else end
        out.append(text[start:end])
        start = end


async def read_pages(
    pool: AsyncConnectionPool, scope: list[str] | None, ref: str, page_range: str | None
) -> PageSelection:
    """The pages `page_range` names ('1-5,8'; all when omitted) of a ready document."""
    async with scoped_connection(pool, scope) as conn:
        doc = await ready_document(conn, ref, scope)
        pages = _pages_of(doc, await store.units(conn, doc.id))
    numbers = set(
        parse_number_list(page_range, "page_range", max((p for p, _ in pages), default=0))
    )
    return PageSelection(doc, [(p, t) for p, t in pages if p in numbers], len(pages))


def _pages_of(doc: docs.DocumentRef, units: list[UnitRow]) -> list[tuple[int, str]]:
    """Pages: stored page units (pdf, txt), or docx sections cut at their page starts."""
    pages = [(u.number, u.body) for u in units if u.kind == "page"]
    if pages:
        return pages
    if doc.file_type in PAGED_BY_SECTION:
        return page_texts(
            [
                Unit(
                    kind=cast(UnitKind, u.kind),
                    number=u.number,
                    body=u.body,
                    title=u.title,
                    meta=u.meta or {},
                )
                for u in units
            ]
        )
    raise InvalidArgument(
        f"a .{doc.file_type} document has no pages: use get_document_data"
        + (" or get_sheet_data" if any(u.kind == "sheet" for u in units) else "")
        + (" or get_slides" if any(u.kind == "slide" for u in units) else ""),
        detail={"file_type": doc.file_type},
    )


Bounds = tuple[int, int, int | None, int | None]  # an A1 range: min_col, min_row, max_col, max_row


@dataclass(frozen=True)
class SheetWindow:
    """The columns of the asked range a page shows: `width` of them from `start` (0-based);
    width 0: as many as the budget holds with the page's first row."""

    start: int = 0
    width: int = 0


async def read_sheet(
    pool: AsyncConnectionPool,
    scope: list[str] | None,
    ref: str,
    sheet_name: str | None,
    bounds: Bounds | None,
    offset: int,
    window: SheetWindow,
    budget: int,
) -> SheetSlice:
    """Rows of a ready document's sheet (see `_sheet_slice`), in one snapshot."""
    async with scoped_connection(pool, scope) as conn:
        doc = await ready_document(conn, ref, scope)
        return await _sheet_slice(conn, doc, sheet_name, bounds, offset, window, budget)


async def _sheet_slice(
    conn: psycopg.AsyncConnection,
    doc: docs.DocumentRef,
    sheet_name: str | None,
    bounds: Bounds | None,
    offset: int,
    window: SheetWindow,
    budget: int,
) -> SheetSlice:
    """Rows of a sheet (the first when unnamed) within an A1 range's bounds, from `offset`
    rows past the range's start, cut to the window's columns; no more rows than `budget`
    tokens could hold. Without a range the header row is left out of the rows (it is
    returned as `headers`)."""
    sheet, names = await _sheet(conn, doc, sheet_name)
    meta = sheet.meta or {}
    total_rows = int(meta.get("rows", 0))
    min_col, min_row, max_col, max_row = bounds or (1, 1, None, None)
    first = max(min_row, HEADER_ROW + 1) if bounds is None else min_row
    last = min(max_row or total_rows, total_rows)
    start = first + offset
    header = await store.sheet_rows(conn, sheet.id, HEADER_ROW, HEADER_ROW)
    header_cells = list(header[0].cells) if header else []
    columns = int(meta.get("columns", 0)) or len(header_cells)
    range_end = min(max_col or columns, columns)  # the range's last column (1-based)
    headers = header_cells[min_col - 1 : range_end]
    width = window.width
    if not width:
        head = await store.sheet_rows(conn, sheet.id, start, start, (min_col, range_end))
        width = column_window(
            headers, list(head[0].cells) if head else [], window.start, max(budget, MIN_WINDOW)
        )
    first_col = min_col + window.start
    cells = (first_col, min(first_col + width - 1, range_end))
    reads = min(SHEET_ROWS_PER_READ, budget // width + 2)  # a cell costs at least a token
    rows = await store.sheet_rows(conn, sheet.id, start, min(last, start + reads - 1), cells)
    return SheetSlice(
        doc=doc,
        sheet_name=sheet.title,
        headers=headers[window.start : window.start + width],
        rows=[list(r.cells) for r in rows],
        first_row=start,
        first_column=first_col,
        width=width,
        more_columns=window.start + width < len(headers),
        remaining=max(0, last - first + 1),
        total_rows=total_rows,
        columns=columns,
        available_sheets=names,
    )


async def _sheet(
    conn: psycopg.AsyncConnection, doc: docs.DocumentRef, sheet_name: str | None
) -> tuple[UnitRow, list[str]]:
    """The named sheet unit (the first when unnamed) and the names of all of them."""
    sheets = await store.units(conn, doc.id, kind="sheet")
    if not sheets:
        raise InvalidArgument(
            "this document has no sheets: use get_document_data or get_pages",
            detail={"file_type": doc.file_type},
        )
    if doc.file_type in ("csv", "tsv") and sheet_name:
        raise InvalidArgument(
            "CSV_NO_SHEETS: CSV files don't have multiple sheets. Omit sheet_name.",
            detail={"message": "CSV_NO_SHEETS"},
        )
    names = [s.title or "" for s in sheets]
    sheet = (
        sheets[0]
        if sheet_name is None
        else next((s for s in sheets if s.title == sheet_name), None)
    )
    if sheet is None:
        raise InvalidArgument(
            f"no sheet '{sheet_name}'; available: {', '.join(names)}",
            detail={"available_sheets": names},
        )
    return sheet, names


def column_window(header: list[str], first_row: list[str], start: int, budget: int) -> int:
    """How many columns from `start` (0-based) a page of a wide sheet shows: as many as
    `budget` tokens of their header and first-row cells hold, at least one."""
    end = max(len(header), len(first_row))
    width = total = 0
    while start + width < end:
        j = start + width
        cells = [c[j] if j < len(c) else "" for c in (header, first_row)]
        cost = sum(count_tokens_many(cells)) + 2 * CELL_OVERHEAD_TOKENS
        if width and total + cost > budget:
            break
        total += cost
        width += 1
    return max(width, 1)


async def read_slides(
    pool: AsyncConnectionPool, scope: list[str] | None, ref: str, slide_numbers: str | None
) -> SlideSelection:
    """The slides `slide_numbers` names ('1-5,8'; all when omitted) of a ready document,
    with speaker notes."""
    async with scoped_connection(pool, scope) as conn:
        doc = await ready_document(conn, ref, scope)
        return await _slides(conn, doc, slide_numbers)


async def _slides(
    conn: psycopg.AsyncConnection, doc: docs.DocumentRef, slide_numbers: str | None
) -> SlideSelection:
    total = (await store.unit_counts(conn, doc.id)).get("slide", 0)
    if not total:
        raise InvalidArgument(
            "this document has no slides: use get_pages or get_document_data",
            detail={"file_type": doc.file_type},
        )
    numbers = parse_number_list(slide_numbers, "slide_numbers", total)
    rows = await store.units(conn, doc.id, kind="slide", numbers=numbers)
    slides = [
        Slide(
            number=r.number,
            title=r.title,
            content=(r.meta or {}).get("body_text", r.body),
            notes=(r.meta or {}).get("notes") or None,
        )
        for r in rows
    ]
    return SlideSelection(doc, slides, total)
