"""Announcing a change of pgrag.documents to every listening pgrag server.

On a single server the `documents_changed` trigger (migration 0008) NOTIFYs; on Citus it
cannot (the change runs on a worker's shard), so each writer here wraps its statement in
`changing()`, which calls pgrag.announce_documents_changed (sql/functions/75_changes.sql)
in the same transaction: the NOTIFY leaves the coordinator on commit, never on rollback.
The function is a no-op while the trigger exists.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Literal

import psycopg
from psycopg.pq import TransactionStatus

ANNOUNCE_SQL = "SELECT pgrag.announce_documents_changed(op) FROM unnest(%s::text[]) AS op"

Operation = Literal["INSERT", "UPDATE", "DELETE"]

CHANNEL = "pgrag_documents"
# The documents that have been ingested (or failed) with their identity and content: a new
# file is first written as `processing` and then finished, two statements and often two
# bursts, but one change. Only a change of this state is announced.
STATE_SQL = """
SELECT count(*), coalesce(sum(hashtextextended(
           d.id::text || '|' || d.path || '|' || d.content_hash, 0)), 0)
FROM pgrag.documents d WHERE d.content_hash IS NOT NULL
"""
LISTEN_SQL = "LISTEN " + CHANNEL


async def listen(conn: psycopg.AsyncConnection) -> None:
    """Subscribe `conn` (autocommit) to the change notifications; read them with
    `conn.notifies()`."""
    await conn.execute(LISTEN_SQL)


async def documents_state(conn: psycopg.AsyncConnection) -> tuple[int, int]:
    """(count, hash) of the finished documents' identities and contents."""
    row = await (await conn.execute(STATE_SQL)).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


async def announce(conn: psycopg.AsyncConnection, *ops: Operation) -> None:
    """Queue the change notifications in the caller's open transaction: one per operation
    the trigger would have fired for (an upsert fires INSERT and UPDATE)."""
    await conn.execute(ANNOUNCE_SQL, (list(ops),))


@contextlib.asynccontextmanager
async def changing(conn: psycopg.AsyncConnection, *ops: Operation) -> AsyncIterator[None]:
    """Run the block's change of pgrag.documents and its announcement in one transaction:
    the caller's when one is open, else a new one (pool connections are autocommit)."""
    if conn.info.transaction_status == TransactionStatus.IDLE:
        async with conn.transaction():
            yield
            await announce(conn, *ops)
    else:
        yield
        await announce(conn, *ops)
