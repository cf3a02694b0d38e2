"""Health checks behind `pgrag doctor`: one line per check, each with the fix when it fails."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pgrag.db import migrations
from pgrag.db.database import connect, resolve_dsn
from pgrag.db.one import scalar
from pgrag.db.server_check import MIN_SERVER_VERSION, ensure_server_ready
from pgrag.embeddings import make_provider
from pgrag.errors import PgragError
from pgrag.settings import Settings, load_settings
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


MAY_MIGRATE_SQL = """
SELECT CASE WHEN to_regnamespace('pgrag') IS NULL
            THEN has_database_privilege(current_database(), 'CREATE')
            ELSE pg_has_role((SELECT nspowner FROM pg_namespace WHERE nspname = 'pgrag'),
                             'USAGE') END
"""


async def _may_migrate(conn: Any) -> bool:
    """Migrations create the schema (CREATE on the database) or change its objects (its
    owner's privileges)."""
    return bool((await (await conn.execute(MAY_MIGRATE_SQL)).fetchone())[0])


async def run_checks(overrides: dict[str, Any]) -> list[Check]:
    checks: list[Check] = []
    try:
        settings = load_settings(**overrides)
    except PgragError as exc:
        return [Check("configuration", False, str(exc))]
    checks.append(
        Check(
            "configuration", True, f"model {settings.embedding_model}, toolsets {settings.toolsets}"
        )
    )

    dims: int | None = None
    try:
        provider = make_provider(settings)
        if hasattr(provider, "probe_dimensions"):
            dims = await provider.probe_dimensions()
        else:
            vec = await provider.embed_query("doctor probe")
            dims = int(vec.shape[0])
        checks.append(Check("embedding model", True, f"{provider.model} loads, {dims} dimensions"))
        await provider.aclose()
    except Exception as exc:
        checks.append(Check("embedding model", False, str(exc)))

    try:
        dsn = resolve_dsn(settings)
        conn = await connect(dsn)
    except PgragError as exc:
        checks.append(Check("database", False, str(exc)))
        return checks
    try:
        checks.append(Check("database", True, f"reachable: {describe_database(settings, dsn)}"))
        num = int(await scalar(conn, "SHOW server_version_num"))
        version = await scalar(conn, "SHOW server_version")
        try:
            info = await ensure_server_ready(conn)
        except PgragError as exc:
            if num < MIN_SERVER_VERSION:
                checks.append(Check("server", False, str(exc)))
            else:  # the server is fine; pgvector is missing, too old or may not be enabled
                checks.append(Check("server", True, f"PostgreSQL {version}"))
                checks.append(Check("pgvector", False, str(exc)))
            return checks
        checks.append(Check("server", True, f"PostgreSQL {info.server_version}"))
        checks.append(Check("pgvector", True, f"vector {info.pgvector_version}"))
        st = await migrations.status(conn)
        if st.pending:
            # not a failure when this role can apply them: ingest, serve and migrate do
            names = [f"{m.version:04d}_{m.name}" for m in st.pending]
            listed = names[0] if len(names) == 1 else f"{names[0]} … {names[-1]}"
            if await _may_migrate(conn):
                detail = (
                    f"{len(names)} pending ({listed}): `pgrag ingest`, `pgrag serve` and "
                    "`pgrag migrate` apply them"
                )
                checks.append(Check("migrations", True, detail, note=True))
            else:
                detail = (
                    f"{len(names)} pending ({listed}) and this user may not create the pgrag "
                    "schema or its objects: run `pgrag migrate` as the schema's owner or a "
                    "user with CREATE on the database"
                )
                checks.append(Check("migrations", False, detail))
        elif st.modified:
            checks.append(Check("migrations", False, f"applied files changed since: {st.modified}"))
        else:
            checks.append(Check("migrations", True, f"{len(st.applied)} applied, none pending"))
            for col in await list_collections(conn):
                if col.set_id is None or dims is None:
                    continue
                try:
                    check_model(col, settings.embedding_model, dims)
                    checks.append(
                        Check(
                            f"collection {col.name}",
                            True,
                            f"{col.model}, {col.dimensions} dimensions",
                        )
                    )
                except PgragError as exc:
                    checks.append(Check(f"collection {col.name}", False, str(exc)))
    finally:
        await conn.close()
    return checks
