"""Folders, document listings, outlines and a document's text, chunks or metadata."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from pgrag.mcp.app_state import enveloped, scope_of, state_of
from pgrag.mcp.envelope import Envelope
from pgrag.mcp.paged import PagedCall, json_tokens, model_tokens
from pgrag.mcp.schemas import (
    ChunkItem,
    DocumentContentData,
    DocumentItem,
    DocumentsData,
    FolderItem,
    FoldersData,
    OutlineData,
)
from pgrag.mcp.toolsets.core.common import DocumentId, MaxTokens, Token, result
from pgrag.services import documents as docs
from pgrag.services import pages

ROWS_PER_READ = 200  # listed per page at most; one more is read to know there are more
CHUNK_LOCATION_KEYS = ("page", "section", "sheet", "row_start", "row_end", "slide", "token_count")


@enveloped()
async def list_folders(ctx: Context[Any, Any]) -> result(FoldersData):  # type: ignore[valid-type]
    """List the folders of the knowledge base with how many documents each holds. Use it
    to explore what exists before list_documents."""
    rows = await docs.folders_of(state_of(ctx).pool, scope_of(ctx))
    return Envelope[FoldersData](data=FoldersData(folders=[FolderItem(**r) for r in rows]))


@enveloped()
async def list_documents(
    ctx: Context[Any, Any],
    folder: Annotated[
        str | None, Field(max_length=1000, description="folder (and subfolders)")
    ] = None,
    file_type: Annotated[str | None, Field(max_length=20, description="e.g. pdf, xlsx")] = None,
    status: Literal["pending", "processing", "ready", "failed"] | None = None,
    max_tokens: MaxTokens = 2000,
    continuation_token: Token = None,
) -> result(DocumentsData):  # type: ignore[valid-type]
    """List documents (name, document_id, type, status, modified) in a folder, paged by
    token budget. Use the document_id with the get_* tools."""
    call = PagedCall.of(ctx, continuation_token, folder, file_type, status)
    rows = await docs.listing(
        call.state.pool,
        scope_of(ctx),
        folder=folder,
        file_type=file_type,
        status=status,
        offset=call.offset,
        limit=ROWS_PER_READ + 1,
    )
    items = [_document_item(r) for r in rows[:ROWS_PER_READ]]
    page = call.cut(items, call.offset + len(rows), max_tokens, model_tokens)
    return page.envelope(DocumentsData(documents=page.items, token_count=page.tokens))


def _document_item(r: dict[str, Any]) -> DocumentItem:
    return DocumentItem(
        document_id=r["document_id"],
        name=r["name"],
        path=r["path"],
        folder=r["folder"],
        file_type=r["file_type"],
        status=r["status"],
        size_bytes=r["size_bytes"],
        title=r["title"],
        collection=r["collection"],
        modified=r["modified_at"].isoformat() if r["modified_at"] else None,
        ocr_pages=r["ocr_pages"],
    )


@enveloped()
async def get_document_outline(
    document_id: DocumentId,
    ctx: Context[Any, Any],
) -> result(OutlineData):  # type: ignore[valid-type]
    """The structure of a document without its text: pdf pages and bookmarks, sheets
    with rows/columns, slide titles, headings; plus size, title, author and dates.
    Instant (cached at ingestion). Use it to choose page/sheet/slide ranges."""
    doc = await docs.find(state_of(ctx).pool, scope_of(ctx), document_id, ready=True)
    return Envelope[OutlineData](
        data=OutlineData(
            document_id=doc.id,
            name=doc.row.name,
            type=doc.file_type,
            outline=doc.row.outline or {},
            metadata=docs.metadata(doc),
        )
    )


@enveloped()
async def get_document_data(
    document_id: DocumentId,
    ctx: Context[Any, Any],
    format: Literal["raw", "chunks", "metadata"] = "raw",
    section: Annotated[
        str | None, Field(max_length=500, description="a heading from the outline")
    ] = None,
    max_tokens: MaxTokens = 2000,
    continuation_token: Token = None,
) -> result(DocumentContentData):  # type: ignore[valid-type]
    """A document's extracted text (format=raw), its indexed chunks with locations
    (format=chunks) or its metadata (format=metadata), paged by token budget. Best for
    txt, md, html, xml; use get_pages / get_sheet_data / get_slides for structured files."""
    call = PagedCall.of(ctx, continuation_token, document_id, format, section)
    if format == "metadata":
        doc = await docs.find(call.state.pool, scope_of(ctx), document_id)
        return Envelope[DocumentContentData](
            data=DocumentContentData(document_id=doc.id, format=format, metadata=docs.metadata(doc))
        )
    if format == "chunks":
        return await _chunks_page(call, scope_of(ctx), document_id, max_tokens)
    doc, texts = await pages.section_texts(call.state.pool, scope_of(ctx), document_id, section)
    pieces = pages.text_pieces(texts)
    text_page = call.cut(
        pieces[call.offset :], len(pieces), max_tokens, lambda p: json_tokens(p.text)
    )
    return text_page.envelope(
        DocumentContentData(
            document_id=doc.id,
            format=format,
            content=pages.join_pieces(text_page.items),
            section=section,
            token_count=text_page.tokens,
        )
    )


async def _chunks_page(
    call: PagedCall, scope: list[str] | None, document_id: str, max_tokens: int
) -> Envelope[DocumentContentData]:
    """The document's indexed chunks from the call's offset, with their locations."""
    doc, rows = await docs.ready_chunks(
        call.state.pool, scope, document_id, call.offset, ROWS_PER_READ + 1
    )
    items = [
        ChunkItem(
            chunk_id=r["chunk_id"],
            ordinal=r["ordinal"],
            content=r["content"],
            metadata={k: r[k] for k in CHUNK_LOCATION_KEYS if r[k] is not None},
            disabled=r["disabled_at"] is not None,
        )
        for r in rows[:ROWS_PER_READ]
    ]
    page = call.cut(items, call.offset + len(rows), max_tokens, model_tokens)
    return page.envelope(
        DocumentContentData(
            document_id=doc.id, format="chunks", chunks=page.items, token_count=page.tokens
        )
    )
