"""Where the data lives: the database, the home folder, logs and retention."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import BaseModel, Field


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
