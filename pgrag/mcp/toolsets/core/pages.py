"""get_pages, get_sheet_data, get_slides: a structured document read page by page."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from pgrag.mcp.app_state import enveloped, scope_of
from pgrag.mcp.paged import PagedCall, json_tokens, model_tokens
from pgrag.mcp.schemas import PageItem, PagesData, SheetData, SlideItem, SlidesData
from pgrag.mcp.toolsets.core.common import DocumentId, MaxTokens, Token, result
from pgrag.paging import page_budget
from pgrag.services import pages
from pgrag.services.ranges import parse_cell_range


@enveloped()
async def get_pages(
    document_id: DocumentId,
    ctx: Context[Any, Any],
    page_range: Annotated[
        str | None, Field(max_length=200, description="e.g. '1-5,8'; all if omitted")
    ] = None,
    max_tokens: MaxTokens = 2000,
    continuation_token: Token = None,
) -> result(PagesData):  # type: ignore[valid-type]
    """Page-by-page text of a paginated document (pdf, docx, txt), e.g. the pages a
    bookmark or a search hit points to. Paged by token budget."""
    call = PagedCall.of(ctx, continuation_token, document_id, page_range)
    chosen = await pages.read_pages(call.state.pool, scope_of(ctx), document_id, page_range)
    wanted = [PageItem(page_number=p, content=t) for p, t in chosen.pages]
    page = call.cut(
        wanted[call.offset :], len(wanted), max_tokens, lambda p: json_tokens(p.content)
    )
    outline = chosen.doc.row.outline or {}
    return page.envelope(
        PagesData(
            document_id=chosen.doc.id,
            pages=page.items,
            total_pages=chosen.total,
            pages_estimated=bool(outline.get("pages_estimated")),
            token_count=page.tokens,
        )
    )


@enveloped()
async def get_sheet_data(
    document_id: DocumentId,
    ctx: Context[Any, Any],
    sheet_name: Annotated[
        str | None, Field(max_length=300, description="omit for CSV files")
    ] = None,
    cell_range: Annotated[
        str | None, Field(max_length=50, description="A1 range, e.g. 'A1:D10'")
    ] = None,
    max_tokens: MaxTokens = 2000,
    continuation_token: Token = None,
) -> result(SheetData):  # type: ignore[valid-type]
    """Rows of a spreadsheet (xlsx, xls, ods, csv) as displayed, with the header row,
    optionally limited to a sheet and an A1 cell range; paged by token budget. A sheet too
    wide for the budget comes in column windows: every row of the first columns, then of
    the next ones (`first_column` says where a page's cells start)."""
    call = PagedCall.of(ctx, continuation_token, document_id, sheet_name, cell_range)
    bounds = parse_cell_range(cell_range)
    window = pages.SheetWindow(int(call.position.get("c", 0)), int(call.position.get("w", 0)))
    sheet = await pages.read_sheet(
        call.state.pool,
        scope_of(ctx),
        document_id,
        sheet_name,
        bounds,
        call.offset,
        window,
        page_budget(max_tokens),
    )
    page = call.cut(
        sheet.rows,
        sheet.remaining,
        max_tokens,
        lambda r: json_tokens(r) + 1,
        extra={"c": window.start, "w": sheet.width},  # the window stays while its rows page
        spent=json_tokens(sheet.headers),
    )
    if not page.has_more and sheet.more_columns:  # the next columns, from the top
        page = call.resume_at(page, {"c": window.start + sheet.width})
    return page.envelope(
        SheetData(
            document_id=sheet.doc.id,
            sheet_name=sheet.sheet_name,
            headers=sheet.headers,
            rows=page.items,
            first_row=sheet.first_row,
            first_column=sheet.first_column,
            total_rows=sheet.total_rows,
            columns=sheet.columns,
            available_sheets=sheet.available_sheets,
            token_count=page.tokens,
        )
    )


@enveloped()
async def get_slides(
    document_id: DocumentId,
    ctx: Context[Any, Any],
    slide_numbers: Annotated[
        str | None, Field(max_length=200, description="e.g. '1-5,8'; all if omitted")
    ] = None,
    max_tokens: MaxTokens = 2000,
    continuation_token: Token = None,
) -> result(SlidesData):  # type: ignore[valid-type]
    """Slides of a presentation (pptx, odp, ppt): number, title, text and speaker notes."""
    call = PagedCall.of(ctx, continuation_token, document_id, slide_numbers)
    chosen = await pages.read_slides(call.state.pool, scope_of(ctx), document_id, slide_numbers)
    items = [
        SlideItem(slide_number=s.number, title=s.title, content=s.content, notes=s.notes)
        for s in chosen.slides
    ]
    page = call.cut(items[call.offset :], len(items), max_tokens, model_tokens)
    return page.envelope(
        SlidesData(
            document_id=chosen.doc.id,
            slides=page.items,
            total_slides=chosen.total,
            token_count=page.tokens,
        )
    )
