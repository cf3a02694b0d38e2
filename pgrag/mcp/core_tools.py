"""The `core` toolset (SPEC §5.2, seed 004): thin handlers over services/ and search/.

Each handler validates (pydantic, from the signature), calls a service and shapes the
envelope; paging is by token budget with signed continuation tokens.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from pgrag.db.scope import scoped_connection
from pgrag.errors import InvalidArgument
from pgrag.ingest.parsers.base import Unit
from pgrag.ingest.parsers.docx import page_texts
from pgrag.mcp.app_state import enveloped, scope_of, state_of
from pgrag.mcp.envelope import Envelope
from pgrag.mcp.paged import Page, PagedCall, json_tokens, model_tokens
from pgrag.mcp.schemas import (
    ChunkItem,
    DocumentContentData,
    DocumentItem,
    DocumentsData,
    EmbeddingData,
    FolderItem,
    FoldersData,
    OutlineData,
    PageItem,
    PagesData,
    SheetData,
    SlideItem,
    SlidesData,
    StatusData,
)
from pgrag.search.models import SearchData, SearchFilters, SearchRequest
from pgrag.services import documents as docs
from pgrag.services.context import SEARCH_TIMEOUT_S
from pgrag.services.ranges import parse_cell_range, parse_number_list
from pgrag.services.status import status_report

T = TypeVar("T")
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

DocumentId = Annotated[
    str,
    Field(min_length=1, max_length=1000, description="document_id, or a unique path or file name"),
]
MaxTokens = Annotated[
    int, Field(ge=50, le=25000, description="token budget for this page (default 2000)")
]
Token = Annotated[
    str | None, Field(max_length=4096, description="continuation_token from the previous page")
]


def _result(model: type[Any]) -> Any:
    return Annotated[CallToolResult, Envelope[model]]  # type: ignore[valid-type]


async def _ready_document(conn: Any, ctx: Context[Any, Any], document_id: str) -> docs.DocumentRef:
    """The document the caller names, visible under its scope and fully ingested."""
    doc = await docs.resolve(conn, document_id, scope_of(ctx))
    docs.require_ready(doc)
    return doc


def register(server: MCPServer[Any]) -> None:
    @server.tool(annotations=READ_ONLY, structured_output=True)
    @enveloped("search", timeout=SEARCH_TIMEOUT_S)
    async def search(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=4000,
                description='question, keywords, "quoted phrase", or a regex in mode=regex',
            ),
        ],
        ctx: Context[Any, Any],
        mode: Literal["hybrid", "semantic", "keyword", "exact", "regex"] = "hybrid",
        scope: Literal["chunks", "documents"] = "chunks",
        limit: Annotated[int, Field(ge=1, le=50)] = 5,
        threshold: Annotated[
            float | None, Field(ge=-1, le=1, description="minimum cosine similarity")
        ] = None,
        filters: SearchFilters | None = None,
        content_mode: Literal["smart_extract", "full", "none"] | None = None,
        context_chars: Annotated[int, Field(ge=0, le=4000)] = 400,
        merge_overlapping: bool = True,
        return_scoring_details: bool = False,
        explain: bool = False,
        max_tokens: MaxTokens = 2000,
        continuation_token: Token = None,
    ) -> _result(SearchData):  # type: ignore[valid-type]
        """Search the knowledge base and get ranked passages with their location (page,
        section, sheet rows, slide), keyword snippets and surrounding context. Use it first
        for any question about the documents. mode: hybrid (default; words + meaning),
        semantic (meaning, works across languages), keyword/exact (the words or a "quoted
        phrase"), regex (patterns such as e-mail addresses). scope=documents returns whole
        documents ranked by their best passage. Follow `actions` CONTINUE for more."""
        state = state_of(ctx)
        req = SearchRequest(
            query=query,
            mode=mode,
            scope=scope,
            limit=limit,
            threshold=threshold,
            filters=filters or SearchFilters(),
            content_mode=content_mode,
            context_chars=context_chars,
            merge_overlapping=merge_overlapping,
            return_scoring_details=return_scoring_details,
            explain=explain,
            max_tokens=max_tokens,
            continuation_token=continuation_token,
        )
        await ctx.report_progress(0, 2, message="searching")
        page = await state.search.search(req, collection_scope=scope_of(ctx), caller="mcp")
        await ctx.report_progress(2, 2, message=f"{len(page.data.results)} results")
        cut = Page(
            items=page.data.results,
            tokens=page.data.token_count,
            has_more=page.has_more,
            token=page.next_token,
            first_exceeded=page.first_exceeded,
            max_tokens=max_tokens,
        )
        return cut.envelope(page.data, "SEARCH_COMPLETED")

    @server.tool(annotations=READ_ONLY)
    @enveloped("list_folders")
    async def list_folders(ctx: Context[Any, Any]) -> _result(FoldersData):  # type: ignore[valid-type]
        """List the folders of the knowledge base with how many documents each holds. Use it
        to explore what exists before list_documents."""
        state = state_of(ctx)
        async with scoped_connection(state.pool, scope_of(ctx)) as conn:
            rows = await docs.list_folders(conn, scope_of(ctx))
        return Envelope[FoldersData](data=FoldersData(folders=[FolderItem(**r) for r in rows]))

    @server.tool(annotations=READ_ONLY)
    @enveloped("list_documents")
    async def list_documents(
        ctx: Context[Any, Any],
        folder: Annotated[
            str | None, Field(max_length=1000, description="folder (and subfolders)")
        ] = None,
        file_type: Annotated[str | None, Field(max_length=20, description="e.g. pdf, xlsx")] = None,
        status: Literal["pending", "processing", "ready", "failed"] | None = None,
        max_tokens: MaxTokens = 2000,
        continuation_token: Token = None,
    ) -> _result(DocumentsData):  # type: ignore[valid-type]
        """List documents (name, document_id, type, status, modified) in a folder, paged by
        token budget. Use the document_id with the get_* tools."""
        call = PagedCall.of(ctx, "list_documents", continuation_token, folder, file_type, status)
        async with scoped_connection(call.state.pool, scope_of(ctx)) as conn:
            rows = await docs.list_documents(
                conn,
                scope_of(ctx),
                folder=folder,
                file_type=file_type,
                status=status,
                offset=call.offset,
                limit=201,
            )
        items = [
            DocumentItem(
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
            )
            for r in rows[:200]
        ]
        page = call.cut(items, call.offset + len(rows), max_tokens, model_tokens)
        return page.envelope(DocumentsData(documents=page.items, token_count=page.tokens))

    @server.tool(annotations=READ_ONLY)
    @enveloped("get_document_outline")
    async def get_document_outline(document_id: DocumentId, ctx: Context[Any, Any]) -> _result(
        OutlineData
    ):  # type: ignore[valid-type]
        """The structure of a document without its text: pdf pages and bookmarks, sheets
        with rows/columns, slide titles, headings; plus size, title, author and dates.
        Instant (cached at ingestion). Use it to choose page/sheet/slide ranges."""
        state = state_of(ctx)
        async with scoped_connection(state.pool, scope_of(ctx)) as conn:
            doc = await _ready_document(conn, ctx, document_id)
        return Envelope[OutlineData](
            data=OutlineData(
                document_id=doc.id,
                name=doc.row["name"],
                type=doc.file_type,
                outline=doc.row["outline"] or {},
                metadata=docs.metadata(doc),
            )
        )

    @server.tool(annotations=READ_ONLY)
    @enveloped("get_document_data")
    async def get_document_data(
        document_id: DocumentId,
        ctx: Context[Any, Any],
        format: Literal["raw", "chunks", "metadata"] = "raw",
        section: Annotated[
            str | None, Field(max_length=500, description="a heading from the outline")
        ] = None,
        max_tokens: MaxTokens = 2000,
        continuation_token: Token = None,
    ) -> _result(DocumentContentData):  # type: ignore[valid-type]
        """A document's extracted text (format=raw), its indexed chunks with locations
        (format=chunks) or its metadata (format=metadata), paged by token budget. Best for
        txt, md, html, xml; use get_pages / get_sheet_data / get_slides for structured files."""
        call = PagedCall.of(
            ctx, "get_document_data", continuation_token, document_id, format, section
        )
        offset = call.offset
        async with scoped_connection(call.state.pool, scope_of(ctx)) as conn:
            doc = await docs.resolve(conn, document_id, scope_of(ctx))
            if format == "metadata":
                return Envelope[DocumentContentData](
                    data=DocumentContentData(
                        document_id=doc.id, format=format, metadata=docs.metadata(doc)
                    )
                )
            docs.require_ready(doc)
            if format == "chunks":
                rows = await docs.chunks(conn, doc.id, after=offset, limit=201)
                items = [
                    ChunkItem(
                        chunk_id=r["chunk_id"],
                        ordinal=r["ordinal"],
                        content=r["content"],
                        metadata={
                            k: r[k]
                            for k in (
                                "page",
                                "section",
                                "sheet",
                                "row_start",
                                "row_end",
                                "slide",
                                "token_count",
                            )
                            if r[k] is not None
                        },
                    )
                    for r in rows[:200]
                ]
                page = call.cut(items, offset + len(rows), max_tokens, model_tokens)
                return page.envelope(
                    DocumentContentData(
                        document_id=doc.id,
                        format=format,
                        chunks=page.items,
                        token_count=page.tokens,
                    )
                )
            units = await docs.units(conn, doc.id)
        if section is not None:
            units = [
                u for u in units if (u["title"] or "").strip().lower() == section.strip().lower()
            ]
            if not units:
                raise InvalidArgument(
                    f"no section '{section}' in this document: see get_document_outline",
                    detail={"field": "section"},
                )
        texts = [u["body"] for u in units]
        text_page = call.cut(texts[offset:], len(texts), max_tokens)
        return text_page.envelope(
            DocumentContentData(
                document_id=doc.id,
                format=format,
                content="\n\n".join(text_page.items),
                section=section,
                token_count=text_page.tokens,
            )
        )

    @server.tool(annotations=READ_ONLY)
    @enveloped("get_pages")
    async def get_pages(
        document_id: DocumentId,
        ctx: Context[Any, Any],
        page_range: Annotated[
            str | None, Field(max_length=200, description="e.g. '1-5,8'; all if omitted")
        ] = None,
        max_tokens: MaxTokens = 2000,
        continuation_token: Token = None,
    ) -> _result(PagesData):  # type: ignore[valid-type]
        """Page-by-page text of a paginated document (pdf, docx, txt), e.g. the pages a
        bookmark or a search hit points to. Paged by token budget."""
        call = PagedCall.of(ctx, "get_pages", continuation_token, document_id, page_range)
        async with scoped_connection(call.state.pool, scope_of(ctx)) as conn:
            doc = await _ready_document(conn, ctx, document_id)
            pages = await _pages_of(conn, doc)
        numbers = parse_number_list(page_range, "page_range", max((p for p, _ in pages), default=0))
        wanted = [PageItem(page_number=p, content=t) for p, t in pages if p in set(numbers)]
        page = call.cut(
            wanted[call.offset :], len(wanted), max_tokens, lambda p: json_tokens(p.content)
        )
        outline = doc.row["outline"] or {}
        return page.envelope(
            PagesData(
                document_id=doc.id,
                pages=page.items,
                total_pages=len(pages),
                pages_estimated=bool(outline.get("pages_estimated")),
                token_count=page.tokens,
            )
        )

    @server.tool(annotations=READ_ONLY)
    @enveloped("get_sheet_data")
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
    ) -> _result(SheetData):  # type: ignore[valid-type]
        """Rows of a spreadsheet (xlsx, xls, ods, csv) as displayed, with the header row,
        optionally limited to a sheet and an A1 cell range; paged by token budget."""
        call = PagedCall.of(
            ctx, "get_sheet_data", continuation_token, document_id, sheet_name, cell_range
        )
        bounds = parse_cell_range(cell_range)
        async with scoped_connection(call.state.pool, scope_of(ctx)) as conn:
            doc = await _ready_document(conn, ctx, document_id)
            sheets = await docs.units(conn, doc.id, kind="sheet")
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
            names = [s["title"] or "" for s in sheets]
            sheet = (
                sheets[0]
                if sheet_name is None
                else next((s for s in sheets if s["title"] == sheet_name), None)
            )
            if sheet is None:
                raise InvalidArgument(
                    f"no sheet '{sheet_name}'; available: {', '.join(names)}",
                    detail={"available_sheets": names},
                )
            meta = sheet["meta"] or {}
            total_rows, columns = int(meta.get("rows", 0)), int(meta.get("columns", 0))
            min_col, min_row, max_col, max_row = bounds or (1, 1, None, None)
            header_row = 1
            first = max(min_row, 2) if bounds is None else min_row
            last = min(max_row or total_rows, total_rows)
            start = first + call.offset
            rows = await docs.sheet_rows(conn, sheet["id"], start, min(last, start + 2000))
            header = await docs.sheet_rows(conn, sheet["id"], header_row, header_row)
        cut = slice(min_col - 1, max_col)
        headers = header[0][1][cut] if header else []
        body = [cells[cut] for _, cells in rows]
        remaining = max(0, last - first + 1)
        page = call.cut(body, remaining, max_tokens, lambda r: json_tokens(r) + 1)
        return page.envelope(
            SheetData(
                document_id=doc.id,
                sheet_name=sheet["title"],
                headers=headers,
                rows=page.items,
                first_row=start,
                total_rows=total_rows,
                columns=columns,
                available_sheets=names,
                token_count=page.tokens,
            )
        )

    @server.tool(annotations=READ_ONLY)
    @enveloped("get_slides")
    async def get_slides(
        document_id: DocumentId,
        ctx: Context[Any, Any],
        slide_numbers: Annotated[
            str | None, Field(max_length=200, description="e.g. '1-5,8'; all if omitted")
        ] = None,
        max_tokens: MaxTokens = 2000,
        continuation_token: Token = None,
    ) -> _result(SlidesData):  # type: ignore[valid-type]
        """Slides of a presentation (pptx, odp, ppt): number, title, text and speaker notes."""
        call = PagedCall.of(ctx, "get_slides", continuation_token, document_id, slide_numbers)
        async with scoped_connection(call.state.pool, scope_of(ctx)) as conn:
            doc = await _ready_document(conn, ctx, document_id)
            counts = await docs.unit_counts(conn, doc.id)
            total = counts.get("slide", 0)
            if not total:
                raise InvalidArgument(
                    "this document has no slides: use get_pages or get_document_data",
                    detail={"file_type": doc.file_type},
                )
            numbers = parse_number_list(slide_numbers, "slide_numbers", total)
            rows = await docs.units(conn, doc.id, kind="slide", numbers=numbers)
        items = [
            SlideItem(
                slide_number=r["number"],
                title=r["title"],
                content=(r["meta"] or {}).get("body_text", r["body"]),
                notes=(r["meta"] or {}).get("notes") or None,
            )
            for r in rows
        ]
        page = call.cut(items[call.offset :], len(items), max_tokens, model_tokens)
        return page.envelope(
            SlidesData(
                document_id=doc.id, slides=page.items, total_slides=total, token_count=page.tokens
            )
        )

    @server.tool(annotations=READ_ONLY)
    @enveloped("get_status")
    async def get_status(
        ctx: Context[Any, Any],
        document_id: Annotated[
            str | None, Field(max_length=1000, description="omit for all documents")
        ] = None,
    ) -> _result(StatusData):  # type: ignore[valid-type]
        """Ingestion status: document counts by status (pending, processing, ready, failed)
        with failures and their reasons, or one document's status and progress. Check it
        before searching newly added files."""
        state = state_of(ctx)
        async with scoped_connection(state.pool, scope_of(ctx)) as conn:
            if document_id:
                doc = await docs.resolve(conn, document_id, scope_of(ctx))
                r = doc.row
                message = {"ready": "DOCUMENT_READY", "failed": "DOCUMENT_FAILED"}.get(
                    r["status"], "DOCUMENT_PROCESSING"
                )
                return Envelope[StatusData](
                    data=StatusData(
                        status=r["status"],
                        progress=r["progress"],
                        message=message,
                        document={
                            "document_id": doc.id,
                            "path": r["path"],
                            "error_code": r["error_code"],
                            "error_detail": r["error_detail"],
                            "ingested": r["ingested_at"].isoformat() if r["ingested_at"] else None,
                        },
                    )
                )
            report = await status_report(conn, None, scope_of(ctx))
        return Envelope[StatusData](
            data=StatusData(
                counts=report["counts"],
                total=report["total"],
                processing=_jsonable_rows(report["processing"]),
                failed=_jsonable_rows(report["failed"]),
            )
        )

    @server.tool(annotations=READ_ONLY)
    @enveloped("get_embedding", timeout=SEARCH_TIMEOUT_S)  # the same embedding work as search
    async def get_embedding(
        text: Annotated[str, Field(min_length=1, max_length=8000, description="text to embed")],
        ctx: Context[Any, Any],
    ) -> _result(EmbeddingData):  # type: ignore[valid-type]
        """The embedding vector of a text with the same model the index uses (query form),
        for custom similarity logic in advanced agents."""
        state = state_of(ctx)
        vec = await state.provider.embed_query(text)
        return Envelope[EmbeddingData](
            data=EmbeddingData(
                embedding=[round(float(x), 6) for x in vec],
                model=state.provider.model,
                dimensions=len(vec),
            )
        )


def _jsonable_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            k: (str(v) if not isinstance(v, str | int | float | bool | type(None)) else v)
            for k, v in r.items()
        }
        for r in rows
    ]


async def _pages_of(conn: Any, doc: docs.DocumentRef) -> list[tuple[int, str]]:
    """Pages: stored page units (pdf, txt), or docx sections cut at their page starts."""
    units = await docs.units(conn, doc.id)
    pages = [(u["number"], u["body"]) for u in units if u["kind"] == "page"]
    if pages:
        return pages
    if doc.file_type in ("docx", "doc", "odt", "rtf"):
        return page_texts(
            [
                Unit(
                    kind=u["kind"],
                    number=u["number"],
                    body=u["body"],
                    title=u["title"],
                    meta=u["meta"] or {},
                )
                for u in units
            ]
        )
    raise InvalidArgument(
        f"a .{doc.file_type} document has no pages: use get_document_data"
        + (" or get_sheet_data" if any(u["kind"] == "sheet" for u in units) else "")
        + (" or get_slides" if any(u["kind"] == "slide" for u in units) else ""),
        detail={"file_type": doc.file_type},
    )
