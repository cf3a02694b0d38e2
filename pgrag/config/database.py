"""Where the data lives: the database, the home folder, logs and retention."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import BaseModel, Field


def default_home() -> Path:
    return Path(platformdirs.user_data_dir("pgrag", appauthor=False))


class DatabaseSettings(BaseModel):
    """Where the data lives: the database, the home folder, logs and retention."""

    database_url: str | None = Field(
        None, description="DSN of an existing Postgres; unset starts an embedded cluster"
    )
    home: Path = Field(
        default_factory=default_home, description="embedded cluster, caches (~/.local/share/pgrag)"
    )
    distributed: bool | None = Field(
        None,
        description="Citus: distribute the tables by collection (docs/scale-out.md); "
        "unset: detect the citus extension",
    )
    log_retention_days: int = Field(
        30,
        ge=0,
        le=36500,
        description="days `pgrag serve` keeps search_log and audit_log rows (0: forever)",
    )
    query_cache_size: int = Field(
        2048, ge=0, le=1_000_000, description="recent query vectors kept in memory (0: off)"
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "WARNING", description="log level"
    )
    log_format: Literal["text", "json"] = Field("text", description="`text` or `json` logs")

    @property
    def uses_embedded_postgres(self) -> bool:
        return not self.database_url
