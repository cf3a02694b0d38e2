"""HTTP transport: REST API, MCP over Streamable HTTP and SSE, auth."""
