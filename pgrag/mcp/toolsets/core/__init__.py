"""The `core` toolset: read-only handlers over services/ and search/, one module per concern.

Each handler validates (pydantic, from the signature), calls a service and shapes the
envelope; paging is by token budget with signed continuation tokens. A handler is found
where it is written: every `@enveloped()` function of the package's modules is a tool
named after the function, so a new tool is its handler and nothing else here.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

from mcp.server import MCPServer

from pgrag.mcp.app_state import tool_name
from pgrag.mcp.toolsets.core.common import READ_ONLY
from pgrag.mcp.toolsets.core.search import search

Handler = Callable[..., Any]


def handlers() -> tuple[Handler, ...]:
    """The package's tool handlers besides `search`, in the order tools/list shows them:
    module by module in name order, each module's in the order it defines them."""
    found: list[Handler] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found += [
            v
            for v in vars(module).values()
            if tool_name(v) and v.__module__ == module.__name__ and v is not search
        ]
    return tuple(found)


def register(server: MCPServer[Any]) -> None:
    server.tool(annotations=READ_ONLY, structured_output=True)(search)  # listed first
    for handler in handlers():
        server.tool(annotations=READ_ONLY)(handler)
