"""The MCP server: core tools, resources, transports (stdio, Streamable HTTP, SSE)."""
