"""The `graph` toolset: a property graph in Postgres tables.

Nodes (label, name, properties, an optional link to a document or chunk) and typed
relationships; traversals and fuzzy search are SQL functions (`pgrag.graph_find_path`,
`pgrag.graph_neighbors`, `pgrag.graph_fuzzy_search`) that a DBA can call from psql. The
handlers here check access and shape the envelope; `pgrag.services.graph` validates and
checks the label / type allow-lists; `pgrag.store.graph` holds the SQL. No tool takes SQL or
Cypher: every value is a bound parameter.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server import MCPServer
from mcp.types import ToolAnnotations

from pgrag.mcp.app_state import enveloped
from pgrag.mcp.toolsets.graph import entities, queries, relations
from pgrag.mcp.toolsets.graph.models import DESTRUCTIVE, READ_ONLY, WRITE

TOOLS: list[tuple[Callable[..., Awaitable[Any]], ToolAnnotations]] = [
    (entities.graph_create_node, WRITE),
    (entities.graph_find_node, READ_ONLY),
    (entities.graph_update_node, WRITE),
    (entities.graph_delete_node, DESTRUCTIVE),
    (relations.graph_create_relationship, WRITE),
    (relations.graph_find_relationship, READ_ONLY),
    (relations.graph_update_relationship, WRITE),
    (relations.graph_delete_relationship, DESTRUCTIVE),
    (queries.graph_find_path, READ_ONLY),
    (queries.graph_find_neighbors, READ_ONLY),
    (queries.graph_fuzzy_search, READ_ONLY),
]


def register(server: MCPServer[Any]) -> None:
    """Publish the graph tools, each enveloped under its own name."""
    for handler, hints in TOOLS:
        server.tool(annotations=hints)(enveloped()(handler))
