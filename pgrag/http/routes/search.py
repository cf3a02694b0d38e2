"""GET /api/search: the data of the MCP `search` tool, with its continuation."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from pgrag.http.deps import Context, Scope, guard
from pgrag.http.errors import error_docs
from pgrag.paging import Continuation
from pgrag.search.flat import SearchQuery, from_flat
from pgrag.search.models import SearchData
from pgrag.services.context import SEARCH_TIMEOUT_S

router = APIRouter(tags=["search"], dependencies=[guard(SEARCH_TIMEOUT_S)])


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
    params: Annotated[SearchQuery, Query()],
) -> dict[str, Any]:
    """Search (same data as the MCP `search` tool; its fields as URL parameters, `q` the
    query, filters flat, a list repeated: `?q=…&file_type=pdf&file_type=docx`)."""
    req = from_flat(params.model_dump())
    page = await context.search.search(req, collection_scope=caller_scope, caller="rest")
    body = page.data.model_dump(mode="json")
    body["continuation"] = {"has_more": page.has_more, "token": page.next_token}
    return body
