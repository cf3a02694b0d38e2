"""The root command: every setting of SPEC §2 is also a global flag (--database-url ...)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click

from pgrag.settings import Settings, load_settings

T = TypeVar("T")


@dataclass
class CliState:
    overrides: dict[str, Any] = field(default_factory=dict)
    _settings: Settings | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(**self.overrides)
        return self._settings


def _settings_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """One --flag per settings field; values are validated by the settings model."""
    for name, info in reversed(Settings.model_fields.items()):
        flag = "--" + name.replace("_", "-")
        help_text = f"{info.description or ''} [env PGRAG_{name.upper()}]"
        func = click.option(flag, name, default=None, help=help_text, metavar="VALUE")(func)
    return func


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@_settings_options
@click.version_option(package_name="pgrag")
@click.pass_context
def cli(ctx: click.Context, **overrides: Any) -> None:
    """pgrag: a Postgres-native RAG server (hybrid search in SQL, MCP, REST, CLI)."""
    ctx.obj = CliState(overrides={k: v for k, v in overrides.items() if v is not None})
    level = (overrides.get("log_level") or "WARNING").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.WARNING), format="%(levelname)s %(name)s: %(message)s"
    )


def state(ctx: click.Context) -> CliState:
    return ctx.find_object(CliState)


def run(coro_fn: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(coro_fn())
