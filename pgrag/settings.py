"""Configuration from PGRAG_* environment variables; every field is also a CLI flag."""

from __future__ import annotations

import ipaddress
import logging
import os
import re
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pgrag.config.database import DatabaseSettings, default_home
from pgrag.config.embedding import LOCAL_MODEL, EmbeddingSettings, LocalEngine
from pgrag.config.ingest import IngestSettings
from pgrag.config.oauth import OAuthSettings
from pgrag.config.renamed import PREFIX, former_names
from pgrag.config.rerank import RerankSettings
from pgrag.config.search import REGEX_TIMEOUT_MS, SearchSettings
from pgrag.config.serving import ServingSettings
from pgrag.config.toolsets import MODULES as TOOLSETS
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

    @field_validator("database_url")
    @classmethod
    def _parsable_dsn(cls, value: str | None) -> str | None:
        """libpq's parse errors name no setting (and may quote the URL, password included):
        say which variable is wrong, in libpq's words minus the URL."""
        if not value:
            return None
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        try:
            params = conninfo_to_dict(value)
        except psycopg.ProgrammingError as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "unparsable"
            reason = re.sub(r'\s*in URI: ".*"$', "", reason)
            if "password" in value or re.search(r"://[^/@]*:[^/@]*@", value):  # a secret
                reason = "it is not a valid connection string"
            raise ValueError(
                f"not a PostgreSQL connection string ({reason}); expected e.g. "
                "postgresql://user:password@host:5432/dbname or 'host=... dbname=...'"
            ) from None
        port = str(params.get("port") or "")
        if port and not all(p.strip().isdigit() for p in port.split(",")):
            raise ValueError(f"port {port!r} is not a number")
        return value

    @field_validator("public_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        """An origin (the metadata paths are fixed at the root), kept without a slash."""
        if value is None:
            return None
        if not re.fullmatch(r"https?://[^/?#\s]+/?", value):
            raise ValueError("must be an origin such as https://rag.example.com (no path)")
        return value.rstrip("/")

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: str | None) -> str | None:
        """Addresses or networks only: `*` would let any peer name itself anyone."""
        names = [n.strip() for n in (value or "").split(",") if n.strip()]
        for name in names:
            try:
                ipaddress.ip_network(name, strict=False)
            except ValueError:
                raise ValueError(f"{name!r} is not an IP address or network") from None
        return ",".join(names) or None

    @field_validator("toolsets")
    @classmethod
    def _known_toolsets(cls, value: str) -> str:
        names = [t.strip() for t in value.split(",") if t.strip()]
        unknown = [n for n in names if n not in TOOLSETS]
        if unknown or not names:
            raise ValueError(f"unknown toolset(s) {unknown}; accepts {', '.join(TOOLSETS)}")
        return ",".join(names)

    @field_validator("graph_labels", "graph_relationship_types")
    @classmethod
    def _graph_names(cls, value: str) -> str:
        names = [t.strip() for t in value.split(",") if t.strip()]
        bad = [n for n in names if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,62}", n)]
        if bad or not names:
            raise ValueError(
                f"expects a comma list of names (a letter, then letters, digits or _): {bad}"
            )
        return ",".join(names)

    @field_validator("embedding_model")
    @classmethod
    def _model_has_provider(cls, value: str) -> str:
        provider, _, name = value.partition("/")
        if not provider or not name:
            raise ValueError("expects provider/model, e.g. local/multilingual-e5-small")
        if provider == "local" and value != LOCAL_MODEL:
            raise ValueError(f"the bundled local model is {LOCAL_MODEL}")
        if provider == "hash" and not name.isdigit():
            raise ValueError("the test embedder is hash/<dimensions>, e.g. hash/384")
        return value

    @field_validator("rerank_model")
    @classmethod
    def _rerank_has_provider(cls, value: str | None) -> str | None:
        if not value:
            return None
        provider, _, name = value.partition("/")
        if not provider or not name:
            raise ValueError("expects provider/model, e.g. cohere/rerank-v3.5")
        return value

    @model_validator(mode="after")
    def _overlap_below_size(self) -> Settings:
        if self.chunk_overlap >= self.chunk_tokens:
            raise ValueError("chunk_overlap must be smaller than chunk_tokens")
        return self

    @cached_property
    def toolset_list(self) -> list[str]:
        return self.toolsets.split(",")


def load_settings(**overrides: object) -> Settings:
    """Build settings, turning validation errors into one line that names the variable."""
    clean: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    try:
        settings = Settings(**clean)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "configuration"
        name = _variable(field)
        msg = err["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{name}: {msg}") from None
    for old, new in DEPRECATED.items():
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
