"""Everything a command or server needs at run time: settings, database pool, provider; and
the set-up steps the commands take on the database (migrate, psql, the checks before
serving). The command line reaches the database only through here and the services."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from pgrag.config.database import DatabaseSettings
from pgrag.db.database import Database, open_database, prepare, resolve_dsn
from pgrag.db.embedded import release_embedded
from pgrag.db.setup import MigrateOutcome, migrate_schema, psql_invocation, ready_to_serve
from pgrag.embeddings import EmbeddingProvider, make_provider
from pgrag.home import check_home
from pgrag.settings import Settings

__all__ = [
    "MigrateOutcome",
    "Runtime",
    "migrate_database",
    "open_runtime",
    "preflight",
    "psql_command",
    "release_embedded",
]


@dataclass
class Runtime:
    settings: Settings
    db: Database
    provider: EmbeddingProvider


@contextlib.asynccontextmanager
async def open_runtime(settings: Settings, *, max_pool: int = 10) -> AsyncIterator[Runtime]:
    check_home(settings.home)  # nothing is read from a home others can write to
    provider = make_provider(settings)
    try:
        async with open_database(settings, max_size=max_pool) as db:
            yield Runtime(settings, db, provider)
    finally:
        await provider.aclose()


async def migrate_database(settings: DatabaseSettings, *, app_role: str | None) -> MigrateOutcome:
    """`pgrag migrate`: create or upgrade the schema and its grants as far as this role may."""
    return await migrate_schema(
        resolve_dsn(settings), distributed=settings.distributed, app_role=app_role
    )


async def psql_command(settings: DatabaseSettings) -> tuple[list[str], dict[str, str]]:
    """`pgrag psql`: the database started and migrated, then psql's command line and its
    environment (the password in PGPASSWORD, never on the command line)."""
    dsn = resolve_dsn(settings)
    await prepare(dsn, distributed=settings.distributed)
    return psql_invocation(dsn, embedded=settings.uses_embedded_postgres)


async def preflight(settings: DatabaseSettings, *, scoped: bool) -> str:
    """Start (or reach) the database, check it and apply migrations, and check that scoped
    keys can be enforced: every set-up problem is a one-line error here, before a server
    framework would report it as a start-up traceback. Returns the DSN."""
    dsn = resolve_dsn(settings)
    await ready_to_serve(dsn, scoped=scoped)
    return dsn
