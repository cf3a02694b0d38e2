"""Where the data lives: the database, the home folder, logs and retention."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import BaseModel, Field, field_validator


def default_home() -> Path:
    return Path(platformdirs.user_data_dir("pgrag", appauthor=False))


class HomeSettings(BaseModel):
    """The folder pgrag keeps its files in, shared by the groups that write there."""

    home: Path = Field(
        default_factory=default_home, description="embedded cluster, caches (~/.local/share/pgrag)"
    )


class DatabaseSettings(HomeSettings):
    """Where the data lives: the database, the home folder, logs and retention."""

    database_url: str | None = Field(
        None, description="DSN of an existing Postgres; unset starts an embedded cluster"
    )
    distributed: bool | None = Field(
        None,
        examples=[False],
        description="Citus: distribute the tables by collection (docs/scale-out.md); "
        "unset: detect the citus extension",
    )
    log_retention_days: int = Field(
        30,
        ge=0,
        le=36500,
        description="days `pgrag serve` keeps search_log and audit_log rows (0: forever)",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "WARNING", description="log level"
    )
    log_format: Literal["text", "json"] = Field("text", description="`text` or `json` logs")

    @property
    def uses_embedded_postgres(self) -> bool:
        return not self.database_url

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
