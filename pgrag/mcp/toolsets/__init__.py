"""Opt-in toolsets (SPEC §5.3), each in its own module with `register(server)`; only the
toolsets named in PGRAG_TOOLSETS are imported and registered."""

from __future__ import annotations

import importlib
from typing import Any

from pgrag.errors import ConfigError

MODULES = {
    "core": "pgrag.mcp.toolsets.core",
    "write": "pgrag.mcp.toolsets.write",
    "graph": "pgrag.mcp.toolsets.graph",
    "web": "pgrag.mcp.toolsets.web",
    "chart": "pgrag.mcp.toolsets.chart",
    "ldims": "pgrag.mcp.toolsets.ldims",
    "rag": "pgrag.mcp.toolsets.rag",
}
CONFLICTS = [({"core", "rag"}, "both define `list_documents`; enable one of them")]


def check_toolsets(names: list[str]) -> None:
    for pair, why in CONFLICTS:
        if pair <= set(names):
            raise ConfigError(
                f"PGRAG_TOOLSETS: {' and '.join(sorted(pair))} cannot be enabled together: {why}"
            )


def register_toolsets(server: Any, names: list[str]) -> None:
    check_toolsets(names)
    for name in names:
        try:
            module = importlib.import_module(MODULES[name])
        except ModuleNotFoundError as exc:
            raise ConfigError(
                f"PGRAG_TOOLSETS: toolset '{name}' is not available in this build"
            ) from exc
        module.register(server)
