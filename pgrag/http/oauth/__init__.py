"""pgrag as an OAuth 2.1 resource server and its own authorization server, on the MCP SDK's
auth module (mcp.server.auth): the SDK validates requests and PKCE; provider.py keeps the
state in PostgreSQL; mount.py wires the routes and the metadata."""
