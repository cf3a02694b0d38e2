"""The toolset registry: each name PGRAG_TOOLSETS accepts and the module whose
`register(server)` publishes its tools. Plain strings, so the settings validate names without
importing the MCP transport; `pgrag.mcp.toolsets` imports the module of each enabled name."""

from __future__ import annotations

MODULES = {
    "core": "pgrag.mcp.toolsets.core",
    "write": "pgrag.mcp.toolsets.write",
    "graph": "pgrag.mcp.toolsets.graph",
    "web": "pgrag.mcp.toolsets.web",
    "chart": "pgrag.mcp.toolsets.chart",
    "ldims": "pgrag.mcp.toolsets.compat.ldims",
    "rag": "pgrag.mcp.toolsets.compat.rag",
}
