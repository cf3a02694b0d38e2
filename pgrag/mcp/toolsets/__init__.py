"""Opt-in toolsets, each a module or package with `register(server)` that
publishes its module-level handlers; only the toolsets named in PGRAG_TOOLSETS are imported
and registered. The compatibility toolsets (`ldims`, `rag`) live under `compat/`."""

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
    "ldims": "pgrag.mcp.toolsets.compat.ldims",
    "rag": "pgrag.mcp.toolsets.compat.rag",
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
