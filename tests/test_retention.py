"""search_log and audit_log retention (pgrag/services/retention.py)."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from pgrag.db.database import open_database
from pgrag.mcp.notify import running_relay
from pgrag.services.context import open_context
from pgrag.services.retention import prune_logs
from pgrag.settings import load_settings

pytestmark = pytest.mark.anyio

SEARCH_ROW = (
    "INSERT INTO pgrag.search_log (created_at, query, mode, scope, params, results)"
    " VALUES (now() - make_interval(days => %s), %s, 'hybrid', 'chunks', '{}', '[]')"
)
AUDIT_ROW = (
    "INSERT INTO pgrag.audit_log (created_at, tool, arguments, caller, duration_ms, outcome,"
    " trace_id) VALUES (now() - make_interval(days => %s), %s, '{}', 't', 1, 'SUCCESS', 'x')"
)


def seed(dsn: str, ages: list[int]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for age in ages:
            conn.execute(SEARCH_ROW, (age, f"q{age}"))
            conn.execute(AUDIT_ROW, (age, f"tool{age}"))


def remaining(dsn: str) -> tuple[list[str], list[str]]:
    with psycopg.connect(dsn) as conn:
        searches = [r[0] for r in conn.execute("SELECT query FROM pgrag.search_log ORDER BY 1")]
        audits = [r[0] for r in conn.execute("SELECT tool FROM pgrag.audit_log ORDER BY 1")]
    return searches, audits


async def test_rows_older_than_the_retention_go_in_batches_and_newer_stay(dsn: str) -> None:
    seed(dsn, [40, 41, 42, 43, 44, 31, 29, 1, 0])
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        removed = await prune_logs(db.pool, 30, batch=2)  # 6 old rows: three full batches
        again = await prune_logs(db.pool, 30)
    assert removed == (6, 6) and again == (0, 0)
    assert remaining(dsn) == (["q0", "q1", "q29"], ["tool0", "tool1", "tool29"])


async def test_zero_days_keeps_everything(dsn: str) -> None:
    seed(dsn, [4000, 1])
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        assert await prune_logs(db.pool, 0) == (0, 0)
    assert remaining(dsn) == (["q1", "q4000"], ["tool1", "tool4000"])


async def test_the_server_prunes_when_it_starts(dsn: str) -> None:
    seed(dsn, [10, 3])
    settings = load_settings(database_url=dsn, log_retention_days=7)
    async with open_context(settings, relay=running_relay):
        for _ in range(200):  # the pruning task runs in the background: bounded wait
            if remaining(dsn) == (["q3"], ["tool3"]):
                break
            await asyncio.sleep(0.05)
    assert remaining(dsn) == (["q3"], ["tool3"])
