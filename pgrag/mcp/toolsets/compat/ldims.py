"""The `ldims` toolset (compatibility with LDIMS clients): `searchDocuments` with
LDIMS's input schema and response shape, and the resource
`ldims://docs/{document_id}/extracted_content`.

Unlike pgrag's own tools these answer in the LDIMS shape, not in the envelope
(`compat.shape`): failures are `isError` results with LDIMS's error body whose `errorCode`
is one of pgrag's stable codes.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pgrag.errors import InvalidArgument
from pgrag.mcp.app_state import scope_of, state_of
from pgrag.mcp.toolsets.compat.ldims_content import iso, register_extracted_content
from pgrag.mcp.toolsets.compat.shape import compat_tool
from pgrag.search.engine import SearchPage
from pgrag.search.models import (
    ContentMode,
    ScoringDetails,
    SearchFilters,
    SearchHit,
    SearchRequest,
)
from pgrag.search.modes import SearchMode
from pgrag.services.compat import DocumentDetails, document_details
from pgrag.services.context import SEARCH_TIMEOUT_S

RESPONSE_TOKEN_BUDGET = 20_000
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


# ---- searchDocuments: schema (LDIMS's, plus the snippet options) --------------------------


class LdimsFilters(BaseModel):
    """Search filters (LDIMS's names)."""

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


def _matched_context(hit: SearchHit, content_mode: ContentMode) -> str:
    """Seed 003 §十: full → the text; smart_extract → the snippet summary when
    PGRAG_RETURN_SNIPPET_SUMMARY, else empty; no snippets → a short preview."""
    if content_mode == "full":
        return hit.content or hit.preview
    if hit.snippets:
        return hit.matched_context or ""
    return hit.preview


def _result_for(
    hit: SearchHit, row: DocumentDetails | None, content_mode: ContentMode
) -> LdimsResult:
    snippets = [LdimsSnippet(**s.model_dump()) for s in hit.snippets]
    file_type = (
        (row.file_type if row else None) or str(hit.metadata.get("document_type") or "") or None
    )
    return LdimsResult(
        documentId=hit.document_id,
        documentName=hit.name,
        relevanceScore=max((s.relevance_score for s in snippets), default=0.0),
        matchedContext=_matched_context(hit, content_mode),
        metadata=LdimsMetadata(
            createdAt=iso(row.created_at if row else None),
            modifiedAt=iso(row.modified_at if row else None),
            submitter=row.submitter if row else None,
            author=row.author if row else None,
            documentType=file_type,
            path=hit.path,
            tags=list((row.tags if row else None) or []) or None,
        ),
        snippets=snippets,
        fileDetails=[
            LdimsFileDetail(
                fileId=hit.document_id,
                fileName=hit.name,
                fileType=file_type,
                fileSize=row.size_bytes if row else None,
                path=hit.path,
                processingStatus=row.status if row else None,
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


# ---- the searchDocuments tool -------------------------------------------------------------


SEARCH_DESCRIPTION = (  # LDIMS's description, then what pgrag adds
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
)


def _response(
    page: SearchPage,
    rows: dict[str, DocumentDetails],
    search_mode: str,
    content: ContentMode,
    started: float,
) -> dict[str, Any]:
    """searchDocuments' answer for one page of pgrag's hits and their documents' metadata."""
    # pgrag's ranking order (SQL), not a re-sort by relevanceScore: the
    # snippet score rewards one keyword near the start of a short text over a passage
    # matching every keyword, so re-sorting would put worse documents first
    hits = page.data.results
    results = [_result_for(h, rows.get(h.document_id), content) for h in hits]
    response = SearchDocumentsResponse(
        results=results,
        totalMatches=page.data.total_matches,
        searchMetadata=LdimsSearchMetadata(
            executionTime=f"{time.perf_counter() - started:.3f}s",
            searchMode=search_mode,
            contentMode=content,
            engineMode=page.data.mode,
            degraded=page.data.degraded,
        ),
    )
    return response.model_dump(mode="json", exclude_none=True)


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
    maxResults: Annotated[  # LDIMS's name
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
    """LDIMS's searchDocuments over pgrag's search (hybrid, or keyword for searchMode exact)."""
    state = state_of(ctx)
    search_mode = (filters or LdimsFilters()).searchMode
    content = content_mode or state.search.default_content_mode
    req = SearchRequest(
        query=query,
        mode=SearchMode.KEYWORD if search_mode == "exact" else SearchMode.HYBRID,
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
    rows = await document_details(state.pool, scope_of(ctx), [h.document_id for h in hits])
    return _response(page, rows, search_mode, content, started)  # type: ignore[return-value]  # see compat_tool


def register(server: MCPServer[Any]) -> None:
    """Publish searchDocuments and the extracted_content resource template."""
    server.tool(name="searchDocuments", annotations=READ_ONLY, description=SEARCH_DESCRIPTION)(
        compat_tool(SEARCH_TIMEOUT_S, name="searchDocuments")(search_documents)
    )
    register_extracted_content(server)
