"""What the core tools share: annotations, argument types and the result type."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from pgrag.mcp.envelope import Envelope

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

DocumentId = Annotated[
    str,
    Field(min_length=1, max_length=1000, description="document_id, or a unique path or file name"),
]
MaxTokens = Annotated[
    int, Field(ge=50, le=25000, description="token budget for this page (default 2000)")
]
Token = Annotated[
    str | None, Field(max_length=4096, description="continuation_token from the previous page")
]


def result(model: type[Any]) -> Any:
    """A tool's return annotation: the call result, its output schema the envelope of `model`."""
    return Annotated[CallToolResult, Envelope[model]]  # type: ignore[valid-type]
