"""Table sources: rows of the user's own tables indexed as documents and kept in sync by
triggers (issue 40). Real PostgreSQL, real triggers, every search mode."""

from __future__ import annotations

import pytest

from pgrag.services import table_sources as service
from tests.support.table_sources import (
    MODES,
    execute,
    make_tickets,
    paths,
    search,
    session,
    sync,
    tickets_source,
)

pytestmark = pytest.mark.anyio


async def test_rows_become_documents_searchable_in_every_mode(dsn: str) -> None:
    make_tickets(dsn)
    async with session(dsn) as (pool, provider):
        info = await service.add_source(pool, tickets_source())
        assert (info.name, info.table, info.pending, info.state) == (
            "tickets",
            "tickets",
            3,
            "backfilling",
        )
        await sync(dsn, pool, provider)
        for mode in MODES:
            query = "E1042" if mode != "regex" else "E10[0-9]+"
            hits = await search(pool, provider, query, mode)
            assert "tables/tickets/1" in paths(hits), mode
        (info,) = await service.list_sources(pool)
        assert (info.rows_indexed, info.pending, info.state) == (3, 0, "ready")
    (doc,) = execute(
        dsn,
        "SELECT title, metadata, source, source_key, outline -> 'source' FROM pgrag.documents"
        " WHERE path = 'tables/tickets/2'",
    )
    assert doc[0] == "Invoice missing"
    assert doc[1] == {"customer": "globex", "priority": 2}
    assert doc[2:4] == ("table", {"id": 2})
    assert doc[4] == {"table": "tickets", "key": {"id": 2}, "source": "tickets"}
