"""The root command: every setting (pgrag/settings.py) is also a global flag (--database-url ...)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import click
from rich.markup import escape

from pgrag.config.renamed import former_names
from pgrag.display import printable
from pgrag.errors import ConfigError
from pgrag.settings import Settings, load_settings

T = TypeVar("T")


def shown(text: str) -> str:
    """Text from a document (a name, a snippet, a reason) as rich prints it: no markup, no
    control or bidi characters (display.py)."""
    return escape(printable(text))


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
        # a renamed setting's former flag still works (its variable does too: settings.py)
        former = [
            f"--{old.removeprefix('PGRAG_').lower().replace('_', '-')}"
            for old in former_names(info.validation_alias)
        ]
        help_text = f"{info.description or ''} [env PGRAG_{name.upper()}]"
        func = click.option(flag, *former, name, default=None, help=help_text, metavar="VALUE")(
            func
        )
    return func


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@_settings_options
@click.version_option(package_name="pgrag")
@click.pass_context
def cli(ctx: click.Context, /, **overrides: Any) -> None:
    """pgrag: a Postgres-native RAG server (hybrid search in SQL, MCP, REST, CLI)."""
    ctx.obj = CliState(overrides={k: v for k, v in overrides.items() if v is not None})
    configure_logging(ctx.obj.overrides)


class JsonLogFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, extra fields, exception."""

    _standard = frozenset({*vars(logging.makeLogRecord({})), "message", "asctime", "color_message"})

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in self._standard and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def configure_logging(overrides: dict[str, Any]) -> None:
    """Root logging on stderr from PGRAG_LOG_LEVEL / PGRAG_LOG_FORMAT (or their flags);
    `json` writes one JSON object per line. A bad value is reported by the command itself."""
    level: str
    try:
        settings = load_settings(warn_deprecated=False, **overrides)  # logging is not set up yet
        level, fmt = settings.log_level, settings.log_format
    except ConfigError:
        level, fmt = str(overrides.get("log_level") or "WARNING").upper(), "text"
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonLogFormatter())
        logging.captureWarnings(True)
    else:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=getattr(logging, level, logging.WARNING), handlers=[handler])


def state(ctx: click.Context) -> CliState:
    found = ctx.find_object(CliState)
    if found is None:  # the root callback always sets it: a command run outside the app
        raise RuntimeError("pgrag CLI state missing: run the command through `pgrag`")
    return found


def run(coro_fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(coro_fn())
