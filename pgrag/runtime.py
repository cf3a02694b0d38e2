"""Everything a command or server needs at run time: settings, database pool, provider."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from pgrag.db.database import Database, open_database
from pgrag.embeddings import EmbeddingProvider, make_provider
from pgrag.home import check_home
from pgrag.settings import Settings


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
