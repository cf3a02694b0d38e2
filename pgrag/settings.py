"""Configuration from PGRAG_* environment variables; every field is also a CLI flag."""

from __future__ import annotations

import logging
import os
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from pgrag.config.database import DatabaseSettings, default_home
from pgrag.config.embedding import LOCAL_MODEL, EmbeddingSettings, LocalEngine
from pgrag.config.ingest import IngestSettings
from pgrag.config.oauth import OAuthSettings
from pgrag.config.renamed import PREFIX, former_names
from pgrag.config.rerank import RerankSettings
from pgrag.config.search import REGEX_TIMEOUT_MS, SearchSettings
from pgrag.config.serving import ServingSettings
from pgrag.errors import ConfigError

log = logging.getLogger(__name__)

# each group in its own module; re-exported here for the code that imports them from settings
__all__ = [
    "DEPRECATED",
    "GROUPS",
    "LOCAL_MODEL",
    "REGEX_TIMEOUT_MS",
    "LocalEngine",
    "Settings",
    "default_home",
    "load_settings",
]


# the groups in the order the docs and .env.example list them (pgrag/settings_table.py)
GROUPS: tuple[type[BaseModel], ...] = (
    DatabaseSettings,
    EmbeddingSettings,
    RerankSettings,
    SearchSettings,
    ServingSettings,
    OAuthSettings,
    IngestSettings,
)


class Settings(
    DatabaseSettings,
    EmbeddingSettings,
    RerankSettings,
    SearchSettings,
    ServingSettings,
    OAuthSettings,
    IngestSettings,
    BaseSettings,
):
    """Every PGRAG_* variable, composed of the subsystems' groups (pgrag/config/): code that
    needs one subsystem's settings takes its group."""

    # by name: the flags and callers pass field names; the environment may use an alias
    model_config = SettingsConfigDict(
        env_prefix="PGRAG_", extra="ignore", frozen=True, populate_by_name=True
    )

    @cached_property
    def toolset_list(self) -> list[str]:
        return self.toolsets.split(",")


def load_settings(*, warn_deprecated: bool = True, **overrides: object) -> Settings:
    """Build settings, turning validation errors into one line that names the variable; a
    former variable name in use is logged once (not by the call that configures logging)."""
    clean: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    try:
        settings = Settings(**clean)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "configuration"
        name = _variable(field)
        msg = err["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{name}: {msg}") from None
    for old, new in DEPRECATED.items() if warn_deprecated else ():
        if old in os.environ and old not in _warned:
            _warned.add(old)
            log.warning("%s is deprecated: set %s instead (same value)", old, new)
    return settings


_warned: set[str] = set()  # each deprecated variable is named once a process


def _variable(field: str) -> str:
    """The variable an error names: the one set, a deprecated name when only it is set."""
    name = field if field.startswith(PREFIX) else PREFIX + field.upper()
    set_old = [old for old, new in DEPRECATED.items() if new == name and old in os.environ]
    return set_old[0] if set_old and name not in os.environ else name


# each former variable -> the variable that replaced it (docs/configuration.md lists them)
DEPRECATED = {
    old: f"{PREFIX}{name.upper()}"
    for name, field in Settings.model_fields.items()
    for old in former_names(field.validation_alias)
}
