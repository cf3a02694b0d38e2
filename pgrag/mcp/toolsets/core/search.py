"""search: ranked passages (the query vector behind them: vectors.py)."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context

from pgrag.mcp.app_state import enveloped, scope_of, state_of
from pgrag.mcp.paged import Page
from pgrag.mcp.signature import fields_of, takes
from pgrag.mcp.toolsets.core.common import result
from pgrag.search.models import SearchData, SearchRequest
from pgrag.services.context import SEARCH_TIMEOUT_S


@enveloped(timeout=SEARCH_TIMEOUT_S)
@takes(SearchRequest, returns=result(SearchData))  # its one declaration
async def search(ctx: Context[Any, Any], **fields: Any) -> Any:
    """Search the knowledge base and get ranked passages with their location (page,
    section, sheet rows, slide), keyword snippets and surrounding context. Use it first
    for any question about the documents; `mode` says what each mode finds.
    scope=documents returns whole documents ranked by their best passage. Follow
    `actions` CONTINUE for more."""
    state = state_of(ctx)
    req = SearchRequest.model_validate(fields_of(SearchRequest, fields))
    max_tokens = req.max_tokens
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
