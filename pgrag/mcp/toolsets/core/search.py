"""search and get_embedding: ranked passages, and the query vector behind them."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from pgrag.mcp.app_state import enveloped, scope_of, state_of
from pgrag.mcp.envelope import Envelope
from pgrag.mcp.paged import Page
from pgrag.mcp.schemas import EmbeddingData
from pgrag.mcp.toolsets.core.common import MaxTokens, Token, result
from pgrag.search.models import (
    ContentMode,
    SearchData,
    SearchFilters,
    SearchRequest,
    SearchScope,
)
from pgrag.search.modes import SearchMode
from pgrag.services.context import SEARCH_TIMEOUT_S


@enveloped(timeout=SEARCH_TIMEOUT_S)
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
    mode: SearchMode = SearchMode.HYBRID,
    scope: SearchScope = "chunks",
    limit: Annotated[int, Field(ge=1, le=50)] = 5,
    threshold: Annotated[
        float | None, Field(ge=-1, le=1, description="minimum cosine similarity")
    ] = None,
    filters: SearchFilters | None = None,
    content_mode: ContentMode | None = None,
    context_chars: Annotated[int, Field(ge=0, le=4000)] = 400,
    merge_overlapping: bool = True,
    return_scoring_details: bool = False,
    explain: bool = False,
    rerank: Annotated[
        bool, Field(description="false: the fused order, even when the server reranks")
    ] = True,
    max_tokens: MaxTokens = 2000,
    continuation_token: Token = None,
) -> result(SearchData):  # type: ignore[valid-type]
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
        rerank=rerank,
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


@enveloped(timeout=SEARCH_TIMEOUT_S)  # the same embedding work as search
async def get_embedding(
    text: Annotated[str, Field(min_length=1, max_length=8000, description="text to embed")],
    ctx: Context[Any, Any],
) -> result(EmbeddingData):  # type: ignore[valid-type]
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
