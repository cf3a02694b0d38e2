"""Every use of the MCP SDK's private parts, in one place.

The SDK offers no public way to do these few things; each helper names the internal it
relies on. tests/test_mcp_sdk.py pins the SDK version they were checked against and fails,
naming the helper, when an internal moves: check this module before raising `SDK_VERSION`.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resources import ResourceTemplate
from mcp.server.subscriptions import SubscriptionBus

SDK_VERSION = "2.3.0"  # the `mcp` release these internals were read from

# MCPServer's request handlers pgrag overrides (pgrag/mcp/server.py): the resource reads'
# error codes and the database-backed resource listing
OVERRIDDEN_HANDLERS = ("_handle_read_resource", "_handle_list_resources")


def lowlevel(server: MCPServer[Any]) -> Server[Any]:
    """The low-level server under an MCPServer (capabilities, stdio's run loop)."""
    low: Server[Any] = server._lowlevel_server
    return low


def drop_request_handler(server: MCPServer[Any], method: str) -> None:
    """Stop answering `method`: the SDK then replies -32601 (method not found)."""
    lowlevel(server)._request_handlers.pop(method, None)


def subscription_bus(server: MCPServer[Any]) -> SubscriptionBus:
    """The bus `subscriptions/listen` streams read (the change relay publishes on it)."""
    return server._subscriptions


def add_resource_template(server: MCPServer[Any], template: ResourceTemplate) -> None:
    """Register a template object of our own (a subclass: `server.resource` builds its own)."""
    server._resource_manager._templates[template.uri_template] = template


def is_unknown_tool(exc: ToolError) -> bool:
    """The SDK's error for a tool name it does not know (it has no type of its own)."""
    return exc.__cause__ is None and str(exc).startswith("Unknown tool")
