"""Services: what the CLI, MCP tools and REST routes call; they speak SQL through store/."""
