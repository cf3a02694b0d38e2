"""get_embedding: the vector the index's model gives a text, the query vector behind a
search (search.py)."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from pgrag.mcp.app_state import enveloped, state_of
from pgrag.mcp.envelope import Envelope
from pgrag.mcp.schemas import EmbeddingData
from pgrag.mcp.toolsets.core.common import result
from pgrag.services.context import SEARCH_TIMEOUT_S


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
