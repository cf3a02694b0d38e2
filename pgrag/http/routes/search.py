"""GET /api/search: the data of the MCP `search` tool, with its continuation."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from pgrag.deadline import within
from pgrag.http.deps import Context, QueryInt, Scope, admitted
from pgrag.http.errors import error_docs
from pgrag.paging import Continuation
from pgrag.search.models import (
    SearchData,
    SearchFilters,
    SearchRequest,
    SearchScope,
    metadata_pairs,
)
from pgrag.search.modes import SearchMode
from pgrag.services.context import SEARCH_TIMEOUT_S

router = APIRouter(tags=["search"], dependencies=[Depends(admitted, scope="function")])


class SearchBody(SearchData):
    continuation: Continuation


@router.get(
    "/api/search",
    response_model=None,
    responses={200: {"model": SearchBody}, **error_docs(403, 404, 429, 502, 504)},
)
async def api_search(
    context: Context,
    caller_scope: Scope,  # not `scope`: that is the query parameter
    q: Annotated[str, Query(min_length=1, max_length=4000)],
    mode: SearchMode = SearchMode.HYBRID,
    scope: SearchScope = "chunks",
    limit: Annotated[QueryInt, Query(ge=1, le=50)] = 5,
    folder: str | None = None,
    file_type: str | None = None,
    collection: str | None = None,
    where: Annotated[
        list[str] | None,
        Query(max_length=20, description="metadata KEY=VALUE, e.g. customer=acme (repeatable)"),
    ] = None,
    max_tokens: Annotated[QueryInt, Query(ge=50, le=25000)] = 2000,
    continuation_token: str | None = None,
    rerank: bool = True,
) -> dict[str, Any]:
    """Search (same data as the MCP `search` tool)."""
    req = SearchRequest(
        query=q,
        mode=mode,
        scope=scope,
        limit=limit,
        max_tokens=max_tokens,
        continuation_token=continuation_token,
        rerank=rerank,
        filters=SearchFilters(
            folder=folder,
            file_type=file_type,
            collection=collection,
            metadata=metadata_pairs(where or []),
        ),
    )
    page = await within(
        context.search.search(req, collection_scope=caller_scope, caller="rest"), SEARCH_TIMEOUT_S
    )
    body = page.data.model_dump(mode="json")
    body["continuation"] = {"has_more": page.has_more, "token": page.next_token}
    return body
