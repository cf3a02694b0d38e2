"""Distributed schema mode (Citus): detect it, say what blocks it, distribute when it can.

Against a Citus coordinator pgrag would keep the small tables as reference tables (a copy
on every node, joinable with anything) and distribute the large ones co-located by
`collection_id`, so a collection-scoped search runs on one shard and every join between
a chunk, its document, unit and embeddings stays on that shard (docs/scale-out.md has the
trade-off against the document id and what was measured).

Citus only accepts a table whose primary, unique and foreign keys include the distribution
column, no plain triggers, no row-security policies with subqueries, and no parameterised
LANGUAGE sql functions over distributed tables. pgrag's single-server schema meets none of
these yet, and changing it changes single-server mode, so `apply()` reads the blockers
from the live catalogue instead of forcing anything: with PGRAG_DISTRIBUTED unset the
tables stay ordinary tables on the coordinator (a working single server); with
PGRAG_DISTRIBUTED=true migrate fails and names each blocker.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

import psycopg

from pgrag.errors import DatabaseError

log = logging.getLogger(__name__)

DISTRIBUTION_COLUMN = "collection_id"
# a copy on every worker: tiny, and joined with every distributed table
REFERENCE_TABLES = ("collections", "embedding_sets")
# co-located with documents, in this order (the first one anchors the co-location group)
DISTRIBUTED_TABLES = ("documents", "units", "sheet_rows", "chunks", "embeddings", "language_sums")

CITUS_INSTALLED_SQL = "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')"
MISSING_COLUMN_SQL = """
SELECT t FROM unnest(%(tables)s::text[]) t
WHERE NOT EXISTS (SELECT 1 FROM pg_attribute a
                  WHERE a.attrelid = ('pgrag.' || t)::regclass
                    AND a.attname = %(col)s AND NOT a.attisdropped)
"""
# primary/unique keys without the column, and foreign keys between distributed tables
# (or from one to a table that stays local) that do not carry it on both sides
KEY_SQL = """
SELECT c.conrelid::regclass::text, c.conname, c.contype::text, pg_get_constraintdef(c.oid)
FROM pg_constraint c
WHERE c.conrelid = ANY (%(rels)s::regclass[])
  AND c.contype IN ('p', 'u', 'f')
  AND NOT (c.contype = 'f' AND c.confrelid = ANY (%(refs)s::regclass[]))
  AND NOT EXISTS (SELECT 1 FROM pg_attribute a
                  WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
                    AND a.attname = %(col)s)
ORDER BY 1, 2
"""
INBOUND_FK_SQL = """
SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)
FROM pg_constraint c
WHERE c.contype = 'f' AND c.confrelid = ANY (%(rels)s::regclass[])
  AND NOT c.conrelid = ANY (%(rels)s::regclass[])
ORDER BY 1, 2
"""
# create_reference_table converts one table at a time: a foreign key with an ON DELETE
# action from one small table to another is refused while the other is still local
REFERENCE_FK_SQL = """
SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)
FROM pg_constraint c
WHERE c.contype = 'f' AND c.conrelid = ANY (%(refs)s::regclass[])
  AND c.confdeltype NOT IN ('a', 'r')
ORDER BY 1, 2
"""
TRIGGER_SQL = """
SELECT tgrelid::regclass::text, tgname FROM pg_trigger
WHERE tgrelid = ANY (%(rels)s::regclass[]) AND NOT tgisinternal ORDER BY 1, 2
"""
POLICY_SQL = """
SELECT polrelid::regclass::text, polname FROM pg_policy
WHERE polrelid = ANY (%(rels)s::regclass[]) AND polqual::text LIKE '%%{SUBLINK%%'
ORDER BY 1, 2
"""
# Citus: "parameterized queries for SQL functions referencing distributed tables are not
# supported"; a LANGUAGE sql function with arguments whose body names a large table
SQL_FUNCTION_SQL = """
SELECT p.oid::regprocedure::text FROM pg_proc p
WHERE p.pronamespace = 'pgrag'::regnamespace
  AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'sql')
  AND p.pronargs > 0 AND p.provolatile <> 'i'  -- immutable ones read no table
  AND p.prosrc ~ %(pattern)s
ORDER BY 1
"""


@dataclass(frozen=True)
class DistributionState:
    """What `apply()` found and did; `mode` is what the database runs as."""

    mode: Literal["single", "coordinator-local", "distributed"]
    blockers: list[str] = field(default_factory=list)


async def citus_installed(conn: psycopg.AsyncConnection) -> bool:
    return bool((await (await conn.execute(CITUS_INSTALLED_SQL)).fetchone())[0])


async def already_distributed(conn: psycopg.AsyncConnection) -> bool:
    row = await (
        await conn.execute(
            "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = ANY (%s::regclass[])",
            ([f"pgrag.{t}" for t in DISTRIBUTED_TABLES],),
        )
    ).fetchone()
    return bool(row and row[0] == len(DISTRIBUTED_TABLES))


async def blockers(conn: psycopg.AsyncConnection) -> list[str]:
    """Everything in the live schema Citus refuses for a by-collection distribution, one
    line each; empty when `distribute()` can run. Read from the catalogue so a schema
    change that removes a blocker removes its line."""
    rels = [f"pgrag.{t}" for t in DISTRIBUTED_TABLES]
    refs = [f"pgrag.{t}" for t in REFERENCE_TABLES]
    params = {"tables": list(DISTRIBUTED_TABLES), "rels": rels, "refs": refs}
    params["col"] = DISTRIBUTION_COLUMN
    found: list[str] = []
    for (table,) in await (await conn.execute(MISSING_COLUMN_SQL, params)).fetchall():
        found.append(f"pgrag.{table} has no {DISTRIBUTION_COLUMN} column")
    for rel, name, kind, definition in await (await conn.execute(KEY_SQL, params)).fetchall():
        what = {"p": "primary key", "u": "unique constraint", "f": "foreign key"}[kind]
        found.append(f"{rel}: {what} {name} {definition} lacks {DISTRIBUTION_COLUMN}")
    for rel, name, definition in await (await conn.execute(INBOUND_FK_SQL, params)).fetchall():
        found.append(f"{rel}: foreign key {name} {definition} points at a distributed table")
    for rel, name, definition in await (await conn.execute(REFERENCE_FK_SQL, params)).fetchall():
        found.append(
            f"{rel}: foreign key {name} {definition} (an ON DELETE action between "
            "tables that become reference tables one at a time)"
        )
    for rel, name in await (await conn.execute(TRIGGER_SQL, params)).fetchall():
        found.append(f"{rel}: trigger {name} (Citus runs triggers on shards only when unsafe)")
    for rel, name in await (await conn.execute(POLICY_SQL, params)).fetchall():
        found.append(f"{rel}: row-security policy {name} has a subquery (Citus refuses it)")
    pattern = r"pgrag\.(" + "|".join(DISTRIBUTED_TABLES) + r")\M"
    for (fn,) in await (await conn.execute(SQL_FUNCTION_SQL, {"pattern": pattern})).fetchall():
        found.append(f"{fn}: parameterised LANGUAGE sql function over distributed tables")
    return found


async def distribute(conn: psycopg.AsyncConnection) -> None:
    """Make the small tables reference tables and distribute the large ones by collection,
    co-located. Idempotent. Callers check `blockers()` first: Citus refuses otherwise."""
    async with conn.transaction():
        done = {
            r[0]
            for r in await (
                await conn.execute("SELECT logicalrelid::regclass::text FROM pg_dist_partition")
            ).fetchall()
        }
        for table in REFERENCE_TABLES:
            if f"pgrag.{table}" not in done:
                await conn.execute("SELECT create_reference_table(%s)", (f"pgrag.{table}",))
        anchor = f"pgrag.{DISTRIBUTED_TABLES[0]}"
        for table in DISTRIBUTED_TABLES:
            rel = f"pgrag.{table}"
            if rel in done:
                continue
            await conn.execute(
                "SELECT create_distributed_table(%s, %s, colocate_with => %s)",
                (rel, DISTRIBUTION_COLUMN, "default" if rel == anchor else anchor),
            )


async def apply(conn: psycopg.AsyncConnection, distributed: bool | None) -> DistributionState:
    """Run after the migrations. `distributed`: PGRAG_DISTRIBUTED (None: detect Citus)."""
    if distributed is False:
        return DistributionState("single")
    if not await citus_installed(conn):
        if distributed:
            raise DatabaseError(
                "PGRAG_DISTRIBUTED=true but the citus extension is not installed in this "
                "database: CREATE EXTENSION citus on the coordinator (docs/scale-out.md)"
            )
        return DistributionState("single")
    if await already_distributed(conn):
        return DistributionState("distributed")
    found = await blockers(conn)
    if not found:
        await distribute(conn)
        return DistributionState("distributed")
    if distributed:
        listed = "\n  - ".join(found)
        raise DatabaseError(
            f"PGRAG_DISTRIBUTED=true: pgrag's schema cannot be distributed on Citus yet "
            f"({len(found)} blockers, see docs/scale-out.md):\n  - {listed}"
        )
    log.warning(
        "citus is installed but pgrag's schema cannot be distributed yet (%d blockers, "
        "docs/scale-out.md): its tables stay local on the coordinator",
        len(found),
    )
    return DistributionState("coordinator-local", found)
