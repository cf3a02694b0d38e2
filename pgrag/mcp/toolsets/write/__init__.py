"""The `write` toolset: notes and documents an agent saves, changes, deletes and finds again.

Small handlers over the saved-documents service (services/saved.py), which parses,
chunks, embeds and writes a saved document like an ingested file, so `search` finds it.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer

from pgrag.mcp.toolsets.write.changes import delete_document, save_document, update_document
from pgrag.mcp.toolsets.write.chunks import set_chunk_enabled
from pgrag.mcp.toolsets.write.common import DESTRUCTIVE, READ_ONLY, WRITE
from pgrag.mcp.toolsets.write.find import find_documents


def register(server: MCPServer[Any]) -> None:
    server.tool(annotations=WRITE)(save_document)
    server.tool(annotations=WRITE)(update_document)
    server.tool(annotations=DESTRUCTIVE)(delete_document)
    server.tool(annotations=READ_ONLY)(find_documents)
    server.tool(annotations=WRITE)(set_chunk_enabled)
