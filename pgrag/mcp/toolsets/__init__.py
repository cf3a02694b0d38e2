"""Opt-in toolsets, each a module or package with `register(server)` that publishes its
module-level handlers; only the toolsets named in PGRAG_TOOLSETS are imported and registered.
The registry (name -> module) is `pgrag.config.toolsets.MODULES`, which the settings check
names against. The compatibility toolsets (`ldims`, `rag`) live under `compat/`."""

from __future__ import annotations

import importlib
from typing import Any

from pgrag.config.toolsets import MODULES
from pgrag.errors import ConfigError

__all__ = ["CONFLICTS", "MODULES", "check_toolsets", "register_toolsets"]

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
