"""What the write tools share: annotations, the call timeout, the result type, the service."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ToolAnnotations

from pgrag.mcp.app_state import scope_of, state_of
from pgrag.mcp.envelope import Envelope
from pgrag.services.saved import SavedDocuments

WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def result(model: type[Any]) -> Any:
    """A tool's return annotation: the call result, its output schema the envelope of `model`."""
    return Annotated[CallToolResult, Envelope[model]]  # type: ignore[valid-type]


def saved_documents(ctx: Context[Any, Any]) -> SavedDocuments:
    """The saved-documents service as the calling key sees it."""
    state = state_of(ctx)
    s = state.settings
    return SavedDocuments(state.pool, state.provider, s, s.write_max_chars, scope_of(ctx))
