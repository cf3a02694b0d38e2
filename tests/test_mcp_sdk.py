"""pgrag/mcp/sdk.py against the installed MCP SDK: every private part it relies on is still
where it was read from. A failure here names the helper to re-check; then raise
`SDK_VERSION`."""

from __future__ import annotations

import asyncio
import inspect
from importlib.metadata import version
from typing import Any

import pytest
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resources import ResourceTemplate

from pgrag.mcp import sdk


def _server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("sdk-check")

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    @server.prompt()
    def hello() -> str:
        return "hello"

    return server


def test_the_installed_sdk_is_the_one_the_adapter_was_checked_against() -> None:
    assert version("mcp") == sdk.SDK_VERSION, (
        f"mcp {version('mcp')} is installed, pgrag/mcp/sdk.py was checked against "
        f"{sdk.SDK_VERSION}: re-check each helper there, then raise SDK_VERSION"
    )


def test_request_handlers_can_be_dropped() -> None:
    server = _server()
    low = sdk.lowlevel(server)
    assert low.get_request_handler("prompts/list") is not None
    sdk.drop_request_handler(server, "prompts/list")
    assert low.get_request_handler("prompts/list") is None, "drop_request_handler"


def test_the_subscription_bus_is_published_on() -> None:
    bus = sdk.subscription_bus(_server())
    assert callable(getattr(bus, "publish", None)), "subscription_bus"


def test_a_resource_template_of_our_own_is_listed_and_read() -> None:
    server = _server()

    def body(name: str) -> str:
        return f"hi {name}"

    template = ResourceTemplate.from_function(body, uri_template="sdk://greet/{name}")
    sdk.add_resource_template(server, template)

    async def check() -> None:
        listed = await server.list_resource_templates()
        assert [t.uri_template for t in listed] == ["sdk://greet/{name}"], "add_resource_template"
        contents = list(await server.read_resource("sdk://greet/pg"))
        assert contents[0].content == "hi pg"

    asyncio.run(check())


def test_an_unknown_tool_is_told_from_a_failed_one() -> None:
    server = _server()

    async def error_of(name: str, arguments: dict[str, Any]) -> ToolError:
        with pytest.raises(ToolError) as caught:
            await server.call_tool(name, arguments)
        return caught.value

    unknown = asyncio.run(error_of("no_such_tool", {}))
    assert sdk.is_unknown_tool(unknown), f"is_unknown_tool: the SDK now says {unknown}"
    invalid = asyncio.run(error_of("add", {"a": "x", "b": 1}))
    assert not sdk.is_unknown_tool(invalid)


def test_the_overridden_handlers_still_exist() -> None:
    for name in sdk.OVERRIDDEN_HANDLERS:
        handler = getattr(MCPServer, name, None)
        assert handler is not None and inspect.iscoroutinefunction(handler), name
