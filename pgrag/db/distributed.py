"""Distributed schema mode (Citus): detect it, distribute pgrag's tables, say what blocks it.

Against a Citus coordinator pgrag keeps the small tables as reference tables (a copy on
every node, joinable with anything) and distributes the large ones co-located by
`collection_id`, so a collection-scoped search runs on one shard and every join between a
chunk, its document, unit and embeddings stays on that shard (docs/scale-out.md has the
trade-off against the document id and what was measured).

Migration 0018 gave every large table the column and every key between them; what a
single server keeps and Citus cannot is handled here, on the coordinator, at distribution
time (the distributed-only variant, kept to this list):
- the id-only unique keys `documents_id_key` and `chunks_id_key` become plain indexes, and
  the graph's links to documents and chunks (which reference them) are dropped: the graph
  stays a local table on the coordinator, and the writer sets a link to a deleted document
  or chunk NULL (pgrag.unlink_graph, a no-op while the keys exist);
- the triggers on pgrag.embeddings and pgrag.chunks are dropped: the writer
  (pgrag.store.documents, reindex) writes the chunk's language, document and collection and
  calls pgrag.write_language_sums and pgrag.write_bm25_sums, which the triggers made no-ops
  on a single server;
- the `documents_changed` NOTIFY trigger is dropped: it would fire on a worker, where no
  pgrag server listens; the writer (pgrag.store.changes) calls
  pgrag.announce_documents_changed in the change's transaction instead, a no-op while the
  trigger exists, so the NOTIFY leaves the coordinator on commit;
- foreign keys and row-security policies are taken off while the tables are converted one
  at a time and put back after;
- parameterised LANGUAGE sql functions over distributed tables, which Citus cannot plan,
  are re-created as LANGUAGE plpgsql with the same body (`RETURN QUERY`), and functions
  that force generic plans get custom ones, after every application of sql/functions/;
- collection scopes: the policies run on the workers and the coordinator connects to them
  as the current role (pgrag.db.scope.cluster_scopes).
Anything else Citus refuses is a blocker, read from the live catalogue: with
PGRAG_DISTRIBUTED unset the tables then stay ordinary tables on the coordinator; with
PGRAG_DISTRIBUTED=true migrate fails and names each blocker.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal

import psycopg
from psycopg import sql

from pgrag.db.one import scalar
from pgrag.db.scope import cluster_scopes
from pgrag.errors import DatabaseError

log = logging.getLogger(__name__)

DISTRIBUTION_COLUMN = "collection_id"
# a copy on every worker: tiny, and joined with every distributed table
REFERENCE_TABLES = ("collections", "embedding_sets")
# co-located with documents, in this order (the first one anchors the co-location group)
DISTRIBUTED_TABLES = (
    "documents",
    "units",
    "sheet_rows",
    "chunks",
    "embeddings",
    "language_sums",
    "bm25_collection_sums",
    "bm25_term_sums",
)
# tables whose single-server primary key is the id alone (kept there: queries grouping by
# it stay valid); on Citus (id, collection_id), their second unique key, replaces it
ID_KEYED_TABLES = ("documents", "units", "chunks")
# links from the local graph into distributed tables: Citus has no such foreign key
DROPPED_LINKS = ("graph_nodes_document_id_fkey", "graph_nodes_chunk_id_fkey")
# their work is done by the writer on Citus (see the module docstring)
DROPPED_TRIGGERS = (
    "documents_changed",
    "embeddings_lang",
    "embeddings_sums_added",
    "embeddings_sums_removed",
    "chunks_bm25_added",
    "chunks_bm25_removed",
    "chunks_bm25_updated",
)

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
  AND NOT c.conname = ANY (%(handled)s::text[])
  AND NOT EXISTS (SELECT 1 FROM pg_attribute a
                  WHERE a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
                    AND a.attname = %(col)s)
ORDER BY 1, 2
"""
INBOUND_FK_SQL = """
SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)
FROM pg_constraint c
WHERE c.contype = 'f' AND c.confrelid = ANY (%(rels)s::regclass[])
  AND NOT c.conrelid = ANY (%(rels)s::regclass[]) AND NOT c.conrelid = ANY (%(refs)s::regclass[])
  AND NOT c.conname = ANY (%(handled)s::text[])
ORDER BY 1, 2
"""
TRIGGER_SQL = """
SELECT tgrelid::regclass::text, tgname FROM pg_trigger
WHERE tgrelid = ANY (%(rels)s::regclass[]) AND NOT tgisinternal
  AND NOT tgname = ANY (%(handled)s::text[])
ORDER BY 1, 2
"""
POLICY_SQL = """
SELECT polrelid::regclass::text, polname FROM pg_policy
WHERE polrelid = ANY (%(rels)s::regclass[]) AND polqual::text LIKE '%%{SUBLINK%%'
ORDER BY 1, 2
"""
# Citus: "parameterized queries for SQL functions referencing distributed tables are not
# supported"; a LANGUAGE sql function with arguments whose body names a large table
SQL_FUNCTION_SQL = """
SELECT p.oid::regprocedure::text, pg_get_function_arguments(p.oid),
       pg_get_function_result(p.oid), p.proretset, p.provolatile::text, p.prosrc
FROM pg_proc p
WHERE p.pronamespace = 'pgrag'::regnamespace
  AND p.prolang = (SELECT oid FROM pg_language WHERE lanname = 'sql')
  AND p.pronargs > 0 AND p.provolatile <> 'i'  -- immutable ones read no table
  AND p.prosrc ~ %(pattern)s
ORDER BY 1
"""
# every foreign key and policy on the tables being converted: off while Citus converts
# them one at a time, back after
CONVERTED_FK_SQL = """
SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid)
FROM pg_constraint c
WHERE c.contype = 'f' AND c.conrelid = ANY (%(all)s::regclass[])
ORDER BY c.conrelid::regclass::text = ANY (%(refs)s::text[]) DESC, 1, 2
"""
POLICIES_SQL = """
SELECT schemaname || '.' || tablename, policyname, permissive, roles::text[], cmd, qual,
       with_check
FROM pg_policies WHERE schemaname || '.' || tablename = ANY (%(all)s::text[])
ORDER BY 1, 2
"""


@dataclass(frozen=True)
class DistributionState:
    """What `apply()` found and did; `mode` is what the database runs as."""

    mode: Literal["single", "coordinator-local", "distributed"]
    blockers: list[str] = field(default_factory=list)


def _params() -> dict[str, object]:
    rels = [f"pgrag.{t}" for t in DISTRIBUTED_TABLES]
    refs = [f"pgrag.{t}" for t in REFERENCE_TABLES]
    return {
        "tables": list(DISTRIBUTED_TABLES),
        "rels": rels,
        "refs": refs,
        "all": refs + rels,
        "col": DISTRIBUTION_COLUMN,
        "handled": [*(f"{t}_pkey" for t in ID_KEYED_TABLES), *DROPPED_LINKS, *DROPPED_TRIGGERS],
        "pattern": r"pgrag\.(" + "|".join(DISTRIBUTED_TABLES + REFERENCE_TABLES) + r")\M",
    }


async def _rows(conn: psycopg.AsyncConnection, query: str) -> list[tuple[Any, ...]]:
    return await (await conn.execute(query, _params())).fetchall()


async def citus_installed(conn: psycopg.AsyncConnection) -> bool:
    return bool(await scalar(conn, CITUS_INSTALLED_SQL))


async def already_distributed(conn: psycopg.AsyncConnection) -> bool:
    row = await (
        await conn.execute(
            "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = ANY (%s::regclass[])",
            ([f"pgrag.{t}" for t in DISTRIBUTED_TABLES],),
        )
    ).fetchone()
    return bool(row and row[0] == len(DISTRIBUTED_TABLES))


async def blockers(conn: psycopg.AsyncConnection) -> list[str]:
    """Everything in the live schema that Citus refuses for a by-collection distribution
    and `distribute()` does not handle, one line each; empty when it can run. Read from
    the catalogue so a schema change that removes a blocker removes its line."""
    found: list[str] = []
    col = DISTRIBUTION_COLUMN
    for (table,) in await _rows(conn, MISSING_COLUMN_SQL):
        found.append(f"pgrag.{table} has no {col} column")
    for rel, name, kind, definition in await _rows(conn, KEY_SQL):
        what = {"p": "primary key", "u": "unique constraint", "f": "foreign key"}[kind]
        found.append(f"{rel}: {what} {name} {definition} lacks {col}")
    for rel, name, definition in await _rows(conn, INBOUND_FK_SQL):
        found.append(f"{rel}: foreign key {name} {definition} points at a distributed table")
    for rel, name in await _rows(conn, TRIGGER_SQL):
        found.append(f"{rel}: trigger {name} (Citus runs triggers on shards only when unsafe)")
    for rel, name in await _rows(conn, POLICY_SQL):
        found.append(f"{rel}: row-security policy {name} has a subquery (Citus refuses it)")
    return found


async def _prepare(conn: psycopg.AsyncConnection) -> None:
    """What a single server keeps and Citus cannot (module docstring), taken off."""
    links = await (
        await conn.execute(
            "SELECT conrelid::regclass::text, conname FROM pg_constraint"
            " WHERE conname = ANY (%s) AND connamespace = 'pgrag'::regnamespace",
            (list(DROPPED_LINKS),),
        )
    ).fetchall()
    for rel, name in links:
        await conn.execute(
            sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(sql.SQL(rel), sql.Identifier(name))
        )
    triggers = await (
        await conn.execute(
            "SELECT tgrelid::regclass::text, tgname FROM pg_trigger"
            " WHERE tgname = ANY (%s) AND tgrelid = ANY (%s::regclass[]) AND NOT tgisinternal",
            (list(DROPPED_TRIGGERS), _params()["rels"]),
        )
    ).fetchall()
    for rel, name in triggers:
        await conn.execute(
            sql.SQL("DROP TRIGGER {} ON {}").format(sql.Identifier(name), sql.SQL(rel))
        )


def _policy_sql(rel: str, name: str, row: tuple[Any, ...]) -> sql.Composed:
    """CREATE POLICY again from its pg_policies row (expressions as the catalogue prints)."""
    permissive, roles, cmd, qual, check = row
    parts = [
        sql.SQL("CREATE POLICY {} ON {} AS {} FOR {} TO ").format(
            sql.Identifier(name), sql.SQL(rel), sql.SQL(permissive), sql.SQL(cmd)
        ),
        sql.SQL(", ").join(
            sql.SQL("PUBLIC") if r == "public" else sql.Identifier(r) for r in roles
        ),
    ]
    if qual:
        parts.append(sql.SQL(" USING ({})").format(sql.SQL(qual)))
    if check:
        parts.append(sql.SQL(" WITH CHECK ({})").format(sql.SQL(check)))
    return sql.Composed(parts)


async def distribute(conn: psycopg.AsyncConnection) -> None:
    """Make the small tables reference tables and distribute the large ones by collection,
    co-located, in one transaction. Idempotent. Callers check `blockers()` first."""
    if await already_distributed(conn):
        return
    async with conn.transaction():
        await conn.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
        await _prepare(conn)
        fks = await _rows(conn, CONVERTED_FK_SQL)
        policies = await _rows(conn, POLICIES_SQL)
        for rel, name, _ in fks:
            await conn.execute(
                sql.SQL("ALTER TABLE {} DROP CONSTRAINT {}").format(
                    sql.SQL(rel), sql.Identifier(name)
                )
            )
        for rel, name, *_ in policies:
            await conn.execute(
                sql.SQL("DROP POLICY {} ON {}").format(sql.Identifier(name), sql.SQL(rel))
            )
        for table in ID_KEYED_TABLES:
            await conn.execute(
                sql.SQL(
                    "ALTER TABLE {rel} DROP CONSTRAINT {unique}, DROP CONSTRAINT {pkey},"
                    " ADD CONSTRAINT {pkey} PRIMARY KEY (id, collection_id)"
                ).format(
                    rel=sql.Identifier("pgrag", table),
                    unique=sql.Identifier(f"{table}_id_collection_id_key"),
                    pkey=sql.Identifier(f"{table}_pkey"),
                )
            )
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
            if rel not in done:
                await conn.execute(
                    "SELECT create_distributed_table(%s, %s, colocate_with => %s)",
                    (rel, DISTRIBUTION_COLUMN, "default" if rel == anchor else anchor),
                )
                # a populated database: the rows were copied to the shards, and the
                # coordinator's table would keep a dead copy of them on disk
                await conn.execute(
                    "SELECT truncate_local_data_after_distributing_table(%s)", (rel,)
                )
        for rel, name, definition in fks:
            await conn.execute(
                sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {}").format(
                    sql.SQL(rel), sql.Identifier(name), sql.SQL(definition)
                )
            )
        for rel, name, *rest in policies:
            await conn.execute(_policy_sql(rel, name, tuple(rest)))


# functions that plan once per session: a generic plan keeps its parameters, which Citus
# cannot route or plan; on Citus they plan per call
GENERIC_PLAN_SQL = """
SELECT p.oid::regprocedure::text FROM pg_proc p
WHERE p.pronamespace = 'pgrag'::regnamespace
  AND 'plan_cache_mode=force_generic_plan' = ANY (p.proconfig)
ORDER BY 1
"""


async def custom_plans(conn: psycopg.AsyncConnection) -> list[str]:
    """`SET plan_cache_mode = force_custom_plan` on each function that forces generic plans
    (the setting holds for every query it runs, nested functions too). Run after every
    application of sql/functions/."""
    found = [r[0] for r in await (await conn.execute(GENERIC_PLAN_SQL)).fetchall()]
    for signature in found:
        await conn.execute(
            f"ALTER FUNCTION {signature} SET plan_cache_mode = force_custom_plan".encode()
        )
    return found


async def plpgsql_functions(conn: psycopg.AsyncConnection) -> list[str]:
    """Re-create each parameterised LANGUAGE sql function over distributed tables as
    LANGUAGE plpgsql with the same arguments, result and body (one statement each: Citus
    plans the statements of a PL/pgSQL function one by one). Column names win over
    parameter names in both. Run after every application of sql/functions/."""
    rewritten = []
    for signature, args, result, returns_set, volatility, body in await _rows(
        conn, SQL_FUNCTION_SQL
    ):
        statement = body.strip().rstrip(";").strip()
        if ";" in statement.replace("';'", ""):
            continue  # several statements: left to blockers() (none in pgrag today)
        ret = f"RETURN QUERY {statement};" if returns_set else f"RETURN ({statement});"
        kind = {"s": "STABLE", "v": "VOLATILE"}[volatility]
        name = signature.split("(")[0]
        await conn.execute(
            f"CREATE OR REPLACE FUNCTION {name}({args}) RETURNS {result} LANGUAGE plpgsql "
            f"{kind} AS $pgrag_citus$\n#variable_conflict use_column\nBEGIN\n{ret}\nEND\n"
            "$pgrag_citus$".encode()
        )
        rewritten.append(signature)
    return rewritten


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
    if not await already_distributed(conn):
        found = await blockers(conn)
        if found and distributed:
            listed = "\n  - ".join(found)
            raise DatabaseError(
                f"PGRAG_DISTRIBUTED=true: pgrag's schema cannot be distributed on Citus "
                f"({len(found)} blockers, see docs/scale-out.md):\n  - {listed}"
            )
        if found:
            log.warning(
                "citus is installed but pgrag's schema cannot be distributed (%d blockers, "
                "docs/scale-out.md): its tables stay local on the coordinator",
                len(found),
            )
            return DistributionState("coordinator-local", found)
        await distribute(conn)
    await cluster_scopes(conn)
    await plpgsql_functions(conn)
    await custom_plans(conn)
    return DistributionState("distributed")
