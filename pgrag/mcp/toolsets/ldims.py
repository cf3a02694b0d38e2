"""The `ldims` toolset (SPEC §5.3; seeds 000 + 003, compatibility): `searchDocuments` with
LDIMS's input schema and response shape, and the resource
`ldims://docs/{document_id}/extracted_content`.

Unlike pgrag's own tools these answer in the LDIMS shape, not in the envelope; failures are
`isError` results with LDIMS's error body `{isError, errorCode, errorMessage, errorDetails}`
whose `errorCode` is one of pgrag's stable codes. The compatibility helpers here
(`compat_tool`, `compat_result`) are shared with the `rag` toolset.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.mcpserver.resources.templates import ResourceTemplate
from mcp.server.mcpserver.resources.types import FunctionResource, Resource
from mcp.server.mcpserver.utilities.context_injection import inject_context
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from mcp_types import INVALID_PARAMS
from psycopg.rows import dict_row
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pgrag.db.scope import scoped_connection
from pgrag.errors import ErrorCode, InvalidArgument, NotFound, PgragError
from pgrag.jsonable import jsonable as _jsonable
from pgrag.mcp.app_state import _as_pgrag_error, _audit, caller_of, scope_of, state_of
from pgrag.mcp.envelope import MAX_RESPONSE_BYTES, MAX_RESPONSE_TOKENS, _shrink, new_trace_id
from pgrag.mcp.resources import RESOURCE_ERROR
from pgrag.metrics import count_tool_call
from pgrag.search.models import ScoringDetails, SearchFilters, SearchHit, SearchRequest
from pgrag.services import documents as docs
from pgrag.services.context import SEARCH_TIMEOUT_S
from pgrag.tokens import count_json_tokens

RESPONSE_TOKEN_BUDGET = 20_000
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

DOCUMENTS_SQL = """
SELECT d.id::text AS document_id, d.name, d.path, d.file_type, d.size_bytes, d.status,
       d.created_at, d.modified_at, d.ingested_at, d.submitter, d.author, d.tags
FROM pgrag.documents d WHERE d.id = ANY(%s::uuid[])
"""


# ---- compatibility plumbing (also used by the rag toolset) --------------------------------


def compat_result(payload: dict[str, Any], *, is_error: bool = False) -> CallToolResult:
    """The payload as structuredContent and as JSON text, cut to the response cap."""
    text = json.dumps(payload, ensure_ascii=False)
    limit = 20_000
    while (
        count_json_tokens(text) > MAX_RESPONSE_TOKENS or len(text.encode()) > MAX_RESPONSE_BYTES
    ) and limit > 200:
        payload = _shrink(payload, limit)
        text = json.dumps(payload, ensure_ascii=False)
        limit //= 2
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=payload,
        is_error=is_error,
    )


def compat_error(exc: PgragError, trace_id: str) -> dict[str, Any]:
    """LDIMS's error body (seed 000 §4.1) carrying pgrag's stable code."""
    return {
        "isError": True,
        "errorCode": str(exc.code),
        "errorMessage": exc.message,
        "errorDetails": {**exc.detail, "traceId": trace_id},
    }


def compat_tool(
    tool: str, timeout: float
) -> Callable[[Callable[..., Awaitable[dict[str, Any]]]], Callable[..., Awaitable[CallToolResult]]]:
    """Like `enveloped`, for tools that answer in a seed's own shape: time limit, stable
    error codes, metrics and the audit row."""

    def decorate(
        body: Callable[..., Awaitable[dict[str, Any]]],
    ) -> Callable[..., Awaitable[CallToolResult]]:
        @functools.wraps(body)
        async def wrapper(*args: Any, **kwargs: Any) -> CallToolResult:
            started = time.perf_counter()
            trace_id = new_trace_id()
            ctx: Context[Any, Any] = kwargs["ctx"]
            try:
                result = compat_result(await asyncio.wait_for(body(*args, **kwargs), timeout))
                outcome = "SUCCESS"
            except Exception as exc:
                err = _as_pgrag_error(exc, trace_id)
                result = compat_result(compat_error(err, trace_id), is_error=True)
                outcome = str(err.code)
            count_tool_call(tool, "ok" if outcome == "SUCCESS" else outcome)
            await _audit(
                state_of(ctx),
                tool,
                _jsonable({k: v for k, v in kwargs.items() if k != "ctx"}),
                caller_of(ctx),
                round((time.perf_counter() - started) * 1000, 2),
                outcome,
                trace_id,
            )
            return result

        return wrapper

    return decorate


# ---- searchDocuments: schema (seed 000 §4.2 + seed 003 §十) -------------------------------


class LdimsFilters(BaseModel):
    """Search filters (seed 000)."""

    model_config = ConfigDict(extra="ignore")

    dateFrom: str | None = Field(
        None, description="Start date for filtering documents (ISO format)"
    )
    dateTo: str | None = Field(None, description="End date for filtering documents (ISO format)")
    documentType: str | None = Field(None, description="Filter by document type/format")
    submitter: str | None = Field(None, description="Filter by document submitter")
    searchMode: Literal["exact", "semantic"] = Field(
        "semantic",
        description=(
            "The search mode to use: 'exact' for precise matches, 'semantic' for "
            "meaning-based matches"
        ),
    )


class LdimsSnippet(BaseModel):
    content: str
    file_id: str
    file_name: str
    keywords_matched: list[str]
    original_char_start: int
    original_char_end: int
    relevance_score: float
    scoring_details: ScoringDetails | None = None


class LdimsMetadata(BaseModel):
    createdAt: str | None = None
    modifiedAt: str | None = None
    submitter: str | None = None
    author: str | None = None
    documentType: str | None = None
    path: str | None = None
    tags: list[str] | None = None


class LdimsFileDetail(BaseModel):
    fileId: str
    fileName: str
    fileType: str | None = None
    fileSize: int | None = None
    path: str | None = None
    processingStatus: str | None = None


class LdimsResult(BaseModel):
    documentId: str
    documentName: str
    relevanceScore: float = Field(description="the best snippet's relevance_score (0: none)")
    matchedContext: str
    metadata: LdimsMetadata
    snippets: list[LdimsSnippet] = Field(default_factory=list)
    fileDetails: list[LdimsFileDetail] = Field(default_factory=list)
    totalMatches: int = Field(description="snippets in this document")
    rank: int = Field(description="pgrag's rank (1 = best)")
    searchScore: float = Field(description="pgrag's ranking score (fused RRF or lexical)")


class LdimsSearchMetadata(BaseModel):
    executionTime: str
    searchMode: str
    contentMode: str
    engineMode: str = Field(description="pgrag's mode: hybrid (semantic) or keyword (exact)")
    degraded: list[str] = Field(default_factory=list)


class SearchDocumentsResponse(BaseModel):
    results: list[LdimsResult]
    totalMatches: int
    searchMetadata: LdimsSearchMetadata


def _matched_context(hit: SearchHit, content_mode: str) -> str:
    """Seed 003 §十: full → the text; smart_extract → the snippet summary when
    PGRAG_RETURN_SNIPPET_SUMMARY, else empty; no snippets → a short preview."""
    if content_mode == "full":
        return hit.content or hit.preview
    if hit.snippets:
        return hit.matched_context or ""
    return hit.preview


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _result_for(hit: SearchHit, row: dict[str, Any] | None, content_mode: str) -> LdimsResult:
    snippets = [LdimsSnippet(**s.model_dump()) for s in hit.snippets]
    row = row or {}
    file_type = row.get("file_type") or str(hit.metadata.get("document_type") or "") or None
    return LdimsResult(
        documentId=hit.document_id,
        documentName=hit.name,
        relevanceScore=max((s.relevance_score for s in snippets), default=0.0),
        matchedContext=_matched_context(hit, content_mode),
        metadata=LdimsMetadata(
            createdAt=_iso(row.get("created_at")),
            modifiedAt=_iso(row.get("modified_at")),
            submitter=row.get("submitter"),
            author=row.get("author"),
            documentType=file_type,
            path=hit.path,
            tags=list(row.get("tags") or []) or None,
        ),
        snippets=snippets,
        fileDetails=[
            LdimsFileDetail(
                fileId=hit.document_id,
                fileName=hit.name,
                fileType=file_type,
                fileSize=row.get("size_bytes"),
                path=hit.path,
                processingStatus=row.get("status"),
            )
        ],
        totalMatches=len(snippets),
        rank=hit.rank,
        searchScore=hit.score,
    )


def _filters(f: LdimsFilters | None) -> SearchFilters:
    if f is None:
        return SearchFilters()
    try:
        return SearchFilters(
            date_from=f.dateFrom or None,
            date_to=f.dateTo or None,
            file_type=f.documentType or None,
            submitter=f.submitter or None,
        )
    except ValidationError as exc:
        names = {"date_from": "dateFrom", "date_to": "dateTo", "file_type": "documentType"}
        problems = [
            f"filters.{names.get(str(e['loc'][0]), e['loc'][0])}: {e['msg']}" for e in exc.errors()
        ]
        raise InvalidArgument(
            "invalid filters: " + "; ".join(problems) + " (dates are ISO, e.g. 2024-01-31)",
            detail={"errors": problems},
        ) from None


# ---- the extracted_content resource -------------------------------------------------------


class _PerReadMetaTemplate(ResourceTemplate):
    """A template whose function returns (text, meta): the meta travels as the contents'
    `_meta` (seed 000's `metadata`: documentName, extractedAt, format)."""

    async def create_resource(self, uri: str, params: dict[str, Any], context: Any) -> Resource:
        try:
            params = inject_context(self.fn, params, context, self.context_kwarg)
            text, meta = await self.fn(**params)
        except (ResourceError, MCPError):
            raise
        return FunctionResource(
            uri=uri,  # type: ignore[arg-type]
            name=self.name,
            title=self.title,
            description=self.description,
            mime_type=self.mime_type,
            meta=meta,
            fn=lambda: text,
        )


RESOURCE_DESCRIPTION = (  # seed 000 §4.1, verbatim
    "This resource provides access to the full extracted text content of a document stored "
    "in the LDIMS system.\nUse this when you need to:\n"
    "- Read the actual content of a specific document\n"
    "- Answer questions about the content of a known document\n"
    "- Analyze or understand the details within a document\n"
    "The content is pre-processed and extracted from various file formats (PDF, DOCX, etc.) "
    "into plain text."
)

_RESOURCE_ERRORS = {
    ErrorCode.PROCESSING: (
        "PROCESSING",
        "Content extraction is in progress. Please try again later.",
    ),
    ErrorCode.CONTENT_UNAVAILABLE: (
        "CONTENT_UNAVAILABLE_OR_FAILED",
        "Content extraction failed or content is in an unusable state.",
    ),
    ErrorCode.FORBIDDEN: ("FORBIDDEN", "Access to the requested content is forbidden."),
}


def _resource_error(exc: PgragError, uri: str) -> MCPError:
    """Seed 000's error bodies as MCP errors; `code` keeps pgrag's stable code."""
    if isinstance(exc, NotFound):
        ldims, message, rpc = (
            "RESOURCE_NOT_FOUND",
            "Document or its content not found.",
            INVALID_PARAMS,
        )
    elif exc.code in _RESOURCE_ERRORS:
        (ldims, message), rpc = _RESOURCE_ERRORS[exc.code], RESOURCE_ERROR
    else:
        ldims, message, rpc = (
            "SERVER_ERROR",
            "An unexpected error occurred on the server.",
            RESOURCE_ERROR,
        )
    data: dict[str, Any] = {
        "isError": True,
        "errorCode": ldims,
        "errorMessage": message,
        "errorDetails": {"reason": exc.message, **exc.detail},
        "code": str(exc.code),
        "uri": uri,
    }
    if exc.code == ErrorCode.PROCESSING:
        data["status"] = "processing"
    return MCPError(code=rpc, message=f"{ldims}: {message} {exc.message}", data=data)


async def extracted_content(document_id: str, ctx: Context[Any, Any]) -> tuple[str, dict[str, Any]]:
    uri = f"ldims://docs/{document_id}/extracted_content"
    trace_id = new_trace_id()
    try:
        async with scoped_connection(state_of(ctx).pool, scope_of(ctx)) as conn:
            doc = await docs.resolve(conn, document_id, scope_of(ctx))
            docs.require_ready(doc)
            text = await docs.extracted_text(conn, doc.id)
        if not text.strip():
            raise NotFound(
                "the document has no extracted text (e.g. a scanned PDF without a text layer)",
                detail={"document_id": doc.id, "reason": "empty"},
            )
    except Exception as exc:
        raise _resource_error(_as_pgrag_error(exc, trace_id), uri) from exc
    meta = {
        "documentId": doc.id,
        "documentName": doc.row["name"],
        "extractedAt": _iso(doc.row["ingested_at"]),
        "format": doc.file_type,
    }
    return text, meta


# ---- registration -------------------------------------------------------------------------


def register(server: MCPServer[Any]) -> None:
    @server.tool(
        name="searchDocuments",
        annotations=READ_ONLY,
        description=(
            "This tool helps you find relevant documents in the LDIMS system based on natural "
            "language queries.\nUse this tool when you need to:\n"
            "- Find documents matching specific topics or content\n"
            "- Locate documents containing particular information\n"
            "- Search across all documents using keywords or natural language\n"
            "- Get a list of relevant documents before accessing their content\n\n"
            "The tool performs semantic search across document contents and metadata, "
            "returning the most relevant matches.\nEach result includes the document name and "
            "ID, which you can use with the extracted_content resource\nto access the full "
            "content.\n\nResponse (LDIMS compatibility: not pgrag's envelope): {results: "
            "[{documentId, documentName, relevanceScore, matchedContext, metadata, snippets: "
            "[{content, file_id, file_name, keywords_matched, original_char_start, "
            "original_char_end, relevance_score}], fileDetails, totalMatches}], totalMatches, "
            "searchMetadata}. Results come in pgrag's ranking order (`rank`, hybrid "
            "score in `searchScore`); relevanceScore is the best snippet's score. Errors: "
            "isError with {errorCode, errorMessage} (INVALID_ARGUMENT, DB_ERROR, TIMEOUT, ...)."
        ),
    )
    @compat_tool("searchDocuments", timeout=SEARCH_TIMEOUT_S)
    async def search_documents(
        query: Annotated[
            str,
            Field(
                min_length=1,
                max_length=4000,
                description=(
                    "The search query in natural language or keywords. Be specific and include "
                    "key terms related to the information you're looking for."
                ),
            ),
        ],
        ctx: Context[Any, Any],
        maxResults: Annotated[  # seed 000's name
            int,
            Field(
                ge=1,
                le=50,
                description=(
                    "Maximum number of documents to return in the results. Use a larger number "
                    "if you need more comprehensive results."
                ),
            ),
        ] = 5,
        filters: LdimsFilters | None = None,
        content_mode: Annotated[
            Literal["full", "smart_extract"] | None,
            Field(
                description=(
                    "smart_extract: keyword snippets (saves tokens); full: the matching text. "
                    "Default: the server's PGRAG_DEFAULT_CONTENT_MODE"
                )
            ),
        ] = None,
        context_chars: Annotated[
            int, Field(ge=0, le=4000, description="characters kept around each keyword")
        ] = 400,
        merge_overlapping: Annotated[
            bool, Field(description="merge snippets less than 50 characters apart")
        ] = True,
        return_scoring_details: Annotated[
            bool, Field(description="add scoring_details to every snippet")
        ] = False,
    ) -> Annotated[CallToolResult, SearchDocumentsResponse]:
        state = state_of(ctx)
        f = filters or LdimsFilters()
        mode = "keyword" if f.searchMode == "exact" else "hybrid"
        content = content_mode or state.search.default_content_mode
        req = SearchRequest(
            query=query,
            mode=mode,
            scope="documents",
            limit=maxResults,
            filters=_filters(filters),
            content_mode=content,
            context_chars=context_chars,
            merge_overlapping=merge_overlapping,
            return_scoring_details=return_scoring_details,
            max_tokens=RESPONSE_TOKEN_BUDGET,
        )
        started = time.perf_counter()
        page = await state.search.search(req, collection_scope=scope_of(ctx), caller="mcp:ldims")
        hits = page.data.results
        rows: dict[str, dict[str, Any]] = {}
        if hits:
            async with (
                scoped_connection(state.pool, scope_of(ctx)) as conn,
                conn.cursor(row_factory=dict_row) as cur,
            ):
                await cur.execute(DOCUMENTS_SQL, ([h.document_id for h in hits],))
                rows = {r["document_id"]: r for r in await cur.fetchall()}
        # pgrag's ranking order (SQL), not seed 003 §十's re-sort by relevanceScore: the
        # snippet score rewards one keyword near the start of a short text over a passage
        # matching every keyword, so re-sorting would put worse documents first
        results = [_result_for(h, rows.get(h.document_id), content) for h in hits]
        response = SearchDocumentsResponse(
            results=results,
            totalMatches=page.data.total_matches,
            searchMetadata=LdimsSearchMetadata(
                executionTime=f"{time.perf_counter() - started:.3f}s",
                searchMode=f.searchMode,
                contentMode=content,
                engineMode=page.data.mode,
                degraded=page.data.degraded,
            ),
        )
        return response.model_dump(mode="json", exclude_none=True)

    template = _PerReadMetaTemplate.from_function(
        extracted_content,
        uri_template="ldims://docs/{document_id}/extracted_content",
        name="extracted_content",
        title="LDIMS extracted content",
        description=RESOURCE_DESCRIPTION,
        mime_type="text/plain",
    )
    server._resource_manager._templates[template.uri_template] = template
