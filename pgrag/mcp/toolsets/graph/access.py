"""Who may use the graph tools: every caller not limited to collections (row-level security
cannot scope graph data), and for writes only on a writable server."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context

from pgrag.mcp.app_state import require_unscoped, require_writable, state_of
from pgrag.services.graph import UNSCOPED_REASON, GraphService


def graph_for(ctx: Context[Any, Any], *, write: bool = False) -> GraphService:
    """The graph service for this call, after the access checks (FORBIDDEN otherwise)."""
    require_unscoped(ctx, UNSCOPED_REASON)
    state = state_of(ctx)
    if write:
        require_writable(state, ctx)
    return GraphService(state.pool, state.settings)
