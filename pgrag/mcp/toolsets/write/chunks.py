"""set_chunk_enabled: take a chunk out of search results, or put it back (a bad or
misleading passage, without deleting its document). Refused on a read-only server."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from pgrag.mcp.app_state import enveloped, require_writable, scope_of, state_of
from pgrag.mcp.envelope import Envelope, Status
from pgrag.mcp.toolsets.write.common import result
from pgrag.services.chunk_state import ChunkEnabled
from pgrag.services.chunk_state import set_chunk_enabled as set_enabled


@enveloped()
async def set_chunk_enabled(
    chunk_id: Annotated[
        int,
        Field(ge=1, le=2**63 - 1, description="a result's chunk_id (search, get_document_data)"),
    ],
    enabled: Annotated[bool, Field(description="false: no search returns it; true: back")],
    ctx: Context[Any, Any],
) -> result(ChunkEnabled):  # type: ignore[valid-type]
    """Disable a chunk so that no search mode (hybrid, semantic, keyword, regex) returns it,
    or enable it again (it then ranks exactly as before). Its document and text stay; the
    state survives re-ingesting an unchanged file. get_document_data(format=chunks) shows
    it. A chunk of a collection this key may not use is NOT_FOUND; refused with FORBIDDEN
    on a read-only server."""
    state = state_of(ctx)
    require_writable(state, ctx)
    changed = await set_enabled(state.pool, scope_of(ctx), chunk_id, enabled)
    return Envelope[ChunkEnabled](
        data=changed, status=Status(message="CHUNK_ENABLED" if enabled else "CHUNK_DISABLED")
    )
