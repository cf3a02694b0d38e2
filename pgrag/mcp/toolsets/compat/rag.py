"""The `rag` toolset (compatibility with clients of an earlier `rag` MCP server):
`rag_search`, `list_documents` and `get_document` with that server's input schemas and
response shapes.

That server numbers documents with integers; pgrag's ids are UUIDs. The integer `id` here is
derived from the UUID (its first 52 bits: stable, exact in JSON numbers, and computed the
same way in SQL), and every document also carries its `uuid` for the other toolsets.
`get_document` accepts either. Like `ldims`, these tools answer in that server's shape, not in
pgrag's envelope; failures are `isError` results with `{isError, errorCode, errorMessage}`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any
from uuid import UUID

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, Field

from pgrag.jsonable import jsonable
from pgrag.mcp.app_state import scope_of, state_of
from pgrag.mcp.toolsets.compat.shape import compat_tool
from pgrag.paging import fit_to_budget, item_tokens
from pgrag.search.models import SearchFilters, SearchRequest
from pgrag.services import compat
from pgrag.services import documents as docs
from pgrag.services.context import DEFAULT_TIMEOUT_S, SEARCH_TIMEOUT_S
from pgrag.tokens import count_tokens, encoding

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
SEARCH_TOKEN_BUDGET = 20_000
LIST_TOKEN_BUDGET = 20_000
DOCUMENT_TOKENS = 8_000  # default budget for the content and, separately, for the chunks
MAX_DOCUMENT_TOKENS = 10_000

MAX_CHUNK_ROWS = 2000  # more than any token budget here can hold


def int_id(document_id: str | UUID) -> int:
    """Seed 001's integer id of a document (as `pgrag.store.compat.INT_ID_SQL` computes it)."""
    return int(UUID(str(document_id)).hex[:13], 16)


def cut_to_tokens(text: str, budget: int) -> tuple[str, bool]:
    if count_tokens(text) <= budget:
        return text, False
    enc = encoding()
    return enc.decode(enc.encode_ordinary(text)[:budget]).rstrip("\ufffd"), True


# ---- output models (the `rag` response shapes) ------------------------------------------


class RagResult(BaseModel):
    chunk_id: int
    document_id: int
    document_name: str
    content: str
    similarity_score: float
    chunk_index: int
    document_uuid: str


class RagSearchResponse(BaseModel):
    results: list[RagResult]
    total_results: int
    query_time_ms: int


class RagDocumentItem(BaseModel):
    id: int
    filename: str
    file_type: str
    file_size: int | None
    chunk_count: int
    created_at: str | None
    uuid: str


class RagDocumentList(BaseModel):
    documents: list[RagDocumentItem]
    total: int = Field(description="ready documents in all")
    next_offset: int | None = Field(description="offset of the next page, null at the end")


class RagChunk(BaseModel):
    id: int
    chunk_index: int
    content: str


class RagDocument(BaseModel):
    id: int
    filename: str
    file_type: str
    content: str
    metadata: dict[str, Any]
    chunks: list[RagChunk]
    uuid: str
    content_truncated: bool
    total_chunks: int
    next_chunk_offset: int | None


class RagDocumentResponse(BaseModel):
    document: RagDocument


RAG_SEARCH_DESCRIPTION = (
    "Search for relevant document chunks using semantic similarity. Returns {results: "
    "[{chunk_id, document_id, document_name, content, similarity_score, chunk_index}], "
    "total_results, query_time_ms}; similarity_score is the cosine similarity and "
    "threshold its minimum. (`rag` compatibility: not pgrag's envelope)"
)
LIST_DESCRIPTION = (
    "List the searchable documents: {documents: [{id, filename, file_type, file_size, "
    "chunk_count, created_at}]}. Long lists come in pages: pass next_offset as offset. "
    "(`rag` compatibility: not pgrag's envelope)"
)
GET_DESCRIPTION = (
    "A document with its text and chunks: {document: {id, filename, file_type, "
    "content, metadata, chunks: [{id, chunk_index, content}]}}. document_id: the "
    "integer id from list_documents / rag_search (a UUID, path or unique file name "
    "also works). Large documents are cut to max_tokens (content_truncated); page the "
    "chunks with chunk_offset = next_chunk_offset. (`rag` compatibility)"
)


async def rag_search(
    query: Annotated[str, Field(min_length=1, max_length=4000, description="Search query")],
    ctx: Context[Any, Any],
    limit: Annotated[int, Field(ge=1, le=50)] = 5,
    threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.7,
    document_ids: list[int] = [],  # noqa: B006 - `rag`'s schema (default []); never mutated
) -> Annotated[CallToolResult, RagSearchResponse]:
    """Semantic chunk search; each hit carries its chunk's own text and position."""
    state = state_of(ctx)
    started = time.perf_counter()
    filters = SearchFilters()
    if document_ids:
        uuids = await compat.uuids_for_int_ids(state.pool, scope_of(ctx), document_ids)
        if not uuids:
            return RagSearchResponse(  # type: ignore[return-value]  # see compat_tool
                results=[], total_results=0, query_time_ms=_ms(started)
            ).model_dump(mode="json")
        filters = SearchFilters(document_ids=[UUID(u) for u in uuids])
    req = SearchRequest(
        query=query,
        mode="semantic",
        scope="chunks",
        limit=limit,
        threshold=threshold,
        filters=filters,
        content_mode="none",
        max_tokens=SEARCH_TOKEN_BUDGET,
    )
    page = await state.search.search(req, collection_scope=scope_of(ctx), caller="mcp:rag")
    hits = page.data.results
    chunks = await compat.chunk_texts(state.pool, scope_of(ctx), [h.chunk_id for h in hits])
    results = [
        RagResult(
            chunk_id=h.chunk_id,
            document_id=int_id(h.document_id),
            document_name=h.name,
            content=chunks[h.chunk_id][1] if h.chunk_id in chunks else h.preview,
            similarity_score=round(h.score, 6),
            chunk_index=chunks.get(h.chunk_id, (1, ""))[0] - 1,
            document_uuid=h.document_id,
        )
        for h in hits
    ]
    return RagSearchResponse(  # type: ignore[return-value]  # see compat_tool
        results=results, total_results=page.data.total_matches, query_time_ms=_ms(started)
    ).model_dump(mode="json")


async def list_documents(
    ctx: Context[Any, Any],
    offset: Annotated[int, Field(ge=0, description="skip this many documents")] = 0,
    limit: Annotated[int, Field(ge=1, le=500, description="documents per page")] = 200,
) -> Annotated[CallToolResult, RagDocumentList]:
    """One page of the ready documents, cut to the token budget."""
    state = state_of(ctx)
    rows, total = await compat.ready_documents(state.pool, scope_of(ctx), offset, limit)
    items = [
        RagDocumentItem(
            id=int_id(r.document_id),
            filename=r.name,
            file_type=r.file_type,
            file_size=r.size_bytes,
            chunk_count=r.chunk_count,
            created_at=r.created_at.isoformat() if r.created_at else None,
            uuid=r.document_id,
        )
        for r in rows
    ]
    fit = fit_to_budget(items, LIST_TOKEN_BUDGET, lambda d: item_tokens(d.model_dump()))
    kept = items[: fit.count]
    end = offset + len(kept)
    return RagDocumentList(  # type: ignore[return-value]  # see compat_tool
        documents=kept, total=total, next_offset=end if end < total else None
    ).model_dump(mode="json")


async def get_document(
    document_id: Annotated[int | str, Field(description="文档 ID (document id)")],
    ctx: Context[Any, Any],
    max_tokens: Annotated[
        int,
        Field(ge=500, le=MAX_DOCUMENT_TOKENS, description="budget for content and chunks"),
    ] = DOCUMENT_TOKENS,
    chunk_offset: Annotated[int, Field(ge=0, description="first chunk_index to return")] = 0,
) -> Annotated[CallToolResult, RagDocumentResponse]:
    """A ready document's text and a page of its chunks, each cut to the token budget."""
    state = state_of(ctx)
    read = await compat.read_document(
        state.pool, scope_of(ctx), document_id, chunk_offset, MAX_CHUNK_ROWS
    )
    doc, total_chunks = read.doc, read.total_chunks
    content, truncated = cut_to_tokens(read.text, max_tokens)
    chunks = [
        RagChunk(id=r["chunk_id"], chunk_index=r["ordinal"] - 1, content=r["content"])
        for r in read.chunks
    ]
    fit = fit_to_budget(chunks, max_tokens, lambda c: item_tokens(c.model_dump()))
    kept = chunks[: fit.count]
    next_offset = chunk_offset + len(kept)
    return RagDocumentResponse(  # type: ignore[return-value]  # see compat_tool
        document=RagDocument(
            id=int_id(doc.id),
            filename=doc.row.name,
            file_type=doc.file_type,
            content=content,
            metadata=jsonable(docs.metadata(doc)),
            chunks=kept,
            uuid=doc.id,
            content_truncated=truncated,
            total_chunks=total_chunks,
            next_chunk_offset=next_offset if next_offset < total_chunks else None,
        )
    ).model_dump(mode="json")


def register(server: MCPServer[Any]) -> None:
    """Publish rag_search, list_documents and get_document in the `rag` shapes."""
    tools: list[tuple[Callable[..., Awaitable[Any]], str, float]] = [
        (rag_search, RAG_SEARCH_DESCRIPTION, SEARCH_TIMEOUT_S),
        (list_documents, LIST_DESCRIPTION, DEFAULT_TIMEOUT_S),
        (get_document, GET_DESCRIPTION, DEFAULT_TIMEOUT_S),
    ]
    for handler, description, timeout in tools:
        server.tool(annotations=READ_ONLY, description=description)(compat_tool(timeout)(handler))


def _ms(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)
