"""The `core` toolset: read-only handlers over services/ and search/, one module per concern.

Each handler validates (pydantic, from the signature), calls a service and shapes the
envelope; paging is by token budget with signed continuation tokens.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer

from pgrag.mcp.toolsets.core.common import READ_ONLY
from pgrag.mcp.toolsets.core.documents import (
    get_document_data,
    get_document_outline,
    list_documents,
    list_folders,
)
from pgrag.mcp.toolsets.core.pages import get_pages, get_sheet_data, get_slides
from pgrag.mcp.toolsets.core.search import get_embedding, search
from pgrag.mcp.toolsets.core.status import get_status

# in the order tools/list shows them
HANDLERS = (
    list_folders,
    list_documents,
    get_document_outline,
    get_document_data,
    get_pages,
    get_sheet_data,
    get_slides,
    get_status,
    get_embedding,
)


def register(server: MCPServer[Any]) -> None:
    server.tool(annotations=READ_ONLY, structured_output=True)(search)
    for handler in HANDLERS:
        server.tool(annotations=READ_ONLY)(handler)
