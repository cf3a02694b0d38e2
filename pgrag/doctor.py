"""Health checks behind `pgrag doctor`: one line per check, each with the fix when it fails."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from pgrag.db import migrations
from pgrag.db.database import connect, resolve_dsn
from pgrag.db.one import scalar
from pgrag.db.roles import check_schema, may_migrate
from pgrag.db.scope import check_scoping_possible
from pgrag.db.server_check import MIN_SERVER_VERSION, ensure_server_ready
from pgrag.embeddings import make_provider
from pgrag.errors import PgragError, setup_error
from pgrag.settings import Settings, load_settings
from pgrag.store import table_sources, vector_index
from pgrag.store.collections import check_model, list_collections


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    note: bool = False  # worth saying, nothing to fix: does not fail the doctor


def describe_database(settings: Settings, dsn: str) -> str:
    """Where the data is, without the password: for doctor and `serve` start-up lines."""
    if settings.uses_embedded_postgres:
        return f"embedded PostgreSQL in {settings.home / 'pgdata'}"
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(dsn)
    return f"{info.get('user', '?')}@{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '?')}"


async def run_checks(overrides: dict[str, Any]) -> list[Check]:
    """Each check in the order a fix needs them: configuration, model, database, server,
    pgvector, migrations, then each collection's model; stops where the next cannot run."""
    try:
        settings = load_settings(**overrides)
    except PgragError as exc:
        return [Check("configuration", False, str(exc))]
    checks = [
        Check(
            "configuration", True, f"model {settings.embedding_model}, toolsets {settings.toolsets}"
        )
    ]
    model_checks, dims = await _embedding_check(settings)
    checks += model_checks
    try:
        dsn = resolve_dsn(settings)
        conn = await connect(dsn)
    except PgragError as exc:
        checks.append(Check("database", False, str(exc)))
        return checks
    try:
        checks.append(Check("database", True, f"reachable: {describe_database(settings, dsn)}"))
        server = await _server_checks(conn)
        checks += server
        if not all(c.ok for c in server):
            return checks
        migrated = await _migration_check(conn)
        checks.append(migrated)
        if migrated.ok and not migrated.note and dims is not None:
            checks += await _collection_checks(conn, settings.embedding_model, dims)
        if migrated.ok and not migrated.note:
            checks += await _source_checks(conn)
        if migrated.ok and not migrated.note and _limits_keys(settings.api_keys):
            checks.append(await _scoped_keys_check(conn))
    except psycopg.Error as exc:  # a privilege this role lacks: a failed check, not a crash
        setup = setup_error(exc)
        checks.append(Check("database", False, str(setup or exc).splitlines()[0]))
    finally:
        await conn.close()
    return checks


async def _embedding_check(settings: Settings) -> tuple[list[Check], int | None]:
    """The model loads and answers; its dimensions, for the collections' check; which
    engine runs it in process, and how to get the faster one."""
    try:
        provider = make_provider(settings)
        dims = int((await provider.embed_query("doctor probe")).shape[0])
        checks = [Check("embedding model", True, f"{provider.model} loads, {dims} dimensions")]
        if (engine := provider.engine_note()) is not None:
            checks.append(Check("embedding engine", True, engine.reason, note=not engine.fastest))
        await provider.aclose()
        return checks, dims
    except Exception as exc:
        return [Check("embedding model", False, str(exc))], None


async def _server_checks(conn: Any) -> list[Check]:
    """The server's version and pgvector, each its own line so the fix names the right one."""
    num = int(await scalar(conn, "SHOW server_version_num"))
    version = await scalar(conn, "SHOW server_version")
    try:
        info = await ensure_server_ready(conn)
    except PgragError as exc:
        if num < MIN_SERVER_VERSION:
            return [Check("server", False, str(exc))]
        # the server is fine; pgvector is missing, too old or may not be enabled
        return [Check("server", True, f"PostgreSQL {version}"), Check("pgvector", False, str(exc))]
    return [
        Check("server", True, f"PostgreSQL {info.server_version}"),
        Check("pgvector", True, f"vector {info.pgvector_version}"),
    ]


def _limits_keys(api_keys: str | None) -> bool:
    """PGRAG_API_KEYS has a `key=coll1|coll2` entry (pgrag.http.auth's syntax)."""
    return any("=" in part for part in (api_keys or "").split(","))


async def _scoped_keys_check(conn: Any) -> Check:
    """Collection-limited keys need pgrag_scoped, this role's membership and its grants:
    the check `serve` makes at start-up, said before it."""
    try:
        await check_scoping_possible(conn)
    except PgragError as exc:
        return Check("collection-limited keys", False, str(exc))
    return Check("collection-limited keys", True, "role pgrag_scoped ready")


async def _migration_check(conn: Any) -> Check:
    if not await may_migrate(conn):  # the app role of a DBA's set-up: current, or who fixes it
        try:
            await check_schema(conn)
        except PgragError as exc:
            return Check("migrations", False, str(exc))
        st = await migrations.status(conn)
        return Check("migrations", True, f"{len(st.applied)} applied, none pending")
    st = await migrations.status(conn)
    if st.pending:
        # not a failure when this role can apply them: ingest, serve and migrate do
        names = [f"{m.version:04d}_{m.name}" for m in st.pending]
        listed = names[0] if len(names) == 1 else f"{names[0]} … {names[-1]}"
        detail = (
            f"{len(names)} pending ({listed}): `pgrag ingest`, `pgrag serve` and "
            "`pgrag migrate` apply them"
        )
        return Check("migrations", True, detail, note=True)
    if st.modified:
        return Check("migrations", False, f"applied files changed since: {st.modified}")
    return Check("migrations", True, f"{len(st.applied)} applied, none pending")


async def _collection_checks(conn: Any, model: str, dims: int) -> list[Check]:
    """Each collection's vectors match the configured model."""
    checks = []
    for col in await list_collections(conn):
        if col.set_id is None:
            continue
        try:
            check_model(col, model, dims)
            checks.append(
                Check(f"collection {col.name}", True, f"{col.model}, {col.dimensions} dimensions")
            )
        except PgragError as exc:
            checks.append(Check(f"collection {col.name}", False, str(exc)))
        checks += await _index_check(conn, col.name, col.set_id)
    return checks


async def _index_check(conn: Any, collection: str, set_id: int) -> list[Check]:
    """The collection's vector index is there, or being built, or a backfill defers it."""
    state = await vector_index.state(conn, set_id)
    if state is vector_index.IndexState.VALID:
        return []
    name = f"vector index {collection}"
    if phase := await vector_index.building(conn):
        return [
            Check(name, True, f"being built ({phase}); semantic search scans exactly", note=True)
        ]
    if left := await table_sources.backfill_left(conn, collection):
        detail = (
            f"built when the table backfill ends ({left} rows left); semantic search scans exactly"
        )
        return [Check(name, True, detail, note=True)]
    return [
        Check(
            name,
            False,
            f"{state}: semantic search scans every vector; the next `pgrag source sync` or "
            f"`SELECT pgrag.ensure_embedding_index({set_id})` as the schema owner builds it",
        )
    ]


async def _source_checks(conn: Any) -> list[Check]:
    """Each table source can be read as registered (or why not, with the fix)."""
    checks = []
    for src in await table_sources.stats(conn):
        if src.state == "removed":
            continue
        problem = src.failure or await table_sources.problem(conn, src.id)
        detail = (
            f"{src.relation} -> {src.collection}: {src.indexed} rows indexed, {src.pending} pending"
        )
        checks.append(Check(f"source {src.name}", problem is None, problem or detail))
    return checks
