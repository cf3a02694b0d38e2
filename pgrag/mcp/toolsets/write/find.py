"""find_documents: saved documents by topic or title and tags, newest first."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from pgrag.mcp.app_state import enveloped
from pgrag.mcp.envelope import Envelope
from pgrag.mcp.toolsets.write.common import result, saved_documents
from pgrag.mcp.toolsets.write.models import FoundData


@enveloped()
async def find_documents(
    ctx: Context[Any, Any],
    topic: Annotated[
        str | None,
        Field(max_length=500, description="part of the topic or title (case-insensitive)"),
    ] = None,
    tags: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=100)]] | None,
        Field(max_length=50, description="documents having any of these tags"),
    ] = None,
    limit: Annotated[int, Field(ge=1, le=50)] = 5,
    include_content: Annotated[
        bool, Field(description="include the whole text, not only a preview")
    ] = False,
) -> result(FoundData):  # type: ignore[valid-type]
    """Find documents saved with save_document by topic or title and tags, newest
    first. For questions about their content use `search` instead."""
    notes = await saved_documents(ctx).find(topic, tags, limit, include_content)
    return Envelope[FoundData](data=FoundData(items=notes))
