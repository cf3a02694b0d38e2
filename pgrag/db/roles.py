"""The roles a DBA runs pgrag with: the schema's owner migrates, an application role does the
work (`pgrag migrate --app-role ROLE`), pgrag_scoped serves collection-limited keys.

The grants themselves are SQL (sql/functions/80_grants.sql); this module creates the scoped
role where the migrating role may create roles, calls those functions, grants role
membership, and says in one line what it could not do and who can. Run by every `migrate`,
so a later run repairs what an earlier one could not (a missing role, a revoked grant).
A role that may not migrate instead checks that the schema is current (check_schema).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from pgrag.db import migrations
from pgrag.db.one import scalar
from pgrag.errors import DatabaseSetupError

SCOPED_ROLE = "pgrag_scoped"

ROLE_EXISTS_SQL = "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = %s)"
IS_MEMBER_SQL = "SELECT pg_has_role(%s, 'pgrag_scoped', 'MEMBER')"
OWNS_SCHEMA_SQL = (
    "SELECT pg_has_role((SELECT nspowner FROM pg_namespace WHERE nspname = 'pgrag'), 'USAGE')"
)
SCHEMA_OWNER_SQL = "SELECT nspowner::regrole::text FROM pg_namespace WHERE nspname = 'pgrag'"
# migrations create the schema (CREATE on the database) or change its objects (its owner's)
MAY_MIGRATE_SQL = """
SELECT CASE WHEN to_regnamespace('pgrag') IS NULL
            THEN has_database_privilege(current_database(), 'CREATE')
            ELSE pg_has_role((SELECT nspowner FROM pg_namespace WHERE nspname = 'pgrag'),
                             'USAGE') END
"""


@dataclass
class RoleReport:
    """What a migrate run applied and granted, and each thing it could not do with its fix."""

    applied: list[migrations.Migration] = field(default_factory=list)  # by this run
    app_roles: list[str] = field(default_factory=list)
    scoped: bool = False  # pgrag_scoped exists with its grants
    notes: list[str] = field(default_factory=list)


async def may_migrate(conn: psycopg.AsyncConnection) -> bool:
    return bool(await scalar(conn, MAY_MIGRATE_SQL))


async def schema_readable(conn: psycopg.AsyncConnection) -> bool:
    """The schema exists and this role may read its migration records."""
    return bool(
        await scalar(
            conn,
            "SELECT CASE WHEN to_regnamespace('pgrag') IS NULL"
            " OR NOT has_schema_privilege('pgrag', 'USAGE') THEN false"
            " ELSE to_regclass('pgrag.schema_migrations') IS NOT NULL"
            " AND has_table_privilege('pgrag.schema_migrations', 'SELECT') END",
        )
    )


async def _try(conn: psycopg.AsyncConnection, statement: sql.SQL | sql.Composed) -> bool:
    try:
        async with conn.transaction():
            await conn.execute(statement)
    except psycopg.errors.InsufficientPrivilege:
        return False
    return True


async def apply_roles(conn: psycopg.AsyncConnection, app_role: str | None) -> RoleReport:
    """Grant the application roles (`app_role` and those granted before) and pgrag_scoped
    what they miss; create pgrag_scoped where this role may create roles. Under the
    migrations' lock: concurrent GRANTs on one table fail ("tuple concurrently updated")."""
    await conn.execute("SELECT pg_advisory_lock(%s)", (migrations.MIGRATION_LOCK_KEY,))
    try:
        return await _apply_roles(conn, app_role)
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (migrations.MIGRATION_LOCK_KEY,))


async def _apply_roles(conn: psycopg.AsyncConnection, app_role: str | None) -> RoleReport:
    report = RoleReport()
    me = str(await scalar(conn, "SELECT current_user"))
    if app_role is not None and not await scalar(conn, ROLE_EXISTS_SQL, (app_role,)):
        raise DatabaseSetupError(
            f"role {app_role} does not exist: create it first (CREATE ROLE {app_role} LOGIN "
            "PASSWORD '…'; no other privilege needed), then run `pgrag migrate --app-role "
            f"{app_role}` again"
        )
    if not await scalar(conn, ROLE_EXISTS_SQL, (SCOPED_ROLE,)):
        created = await _try(conn, sql.SQL("CREATE ROLE pgrag_scoped NOLOGIN NOBYPASSRLS"))
        if not created:
            report.notes.append(
                f"role {SCOPED_ROLE} missing and {me} may not create roles: collection-limited "
                "API keys are refused until a role with CREATEROLE runs `pgrag migrate "
                f"--app-role {app_role or '<app role>'}` (or a DBA runs CREATE ROLE "
                f"{SCOPED_ROLE} NOLOGIN;)"
            )
    if await scalar(conn, "SELECT has_schema_privilege('pgrag', 'USAGE')"):
        await _grant_tables(conn, app_role, me, report)
    else:  # a DBA with CREATEROLE only: roles and membership; the owner or app role grants
        report.app_roles = [app_role] if app_role else []
        report.scoped = bool(await scalar(conn, ROLE_EXISTS_SQL, (SCOPED_ROLE,)))
    if report.scoped:
        for member in report.app_roles or [me]:
            await _join_scoped(conn, member, me, report)
    return report


async def _grant_tables(
    conn: psycopg.AsyncConnection, app_role: str | None, me: str, report: RoleReport
) -> None:
    """The scoped role's and the application roles' privileges, where any is missing."""
    # SECURITY DEFINER (the owner's): a role that does not own the schema can run it
    report.scoped = bool(await scalar(conn, "SELECT pgrag.scoped_role_granted()")) or bool(
        await scalar(conn, "SELECT pgrag.grant_scoped_role()")
    )
    owner = bool(await scalar(conn, OWNS_SCHEMA_SQL))
    known = [
        str(r) for (r,) in await (await conn.execute("SELECT pgrag.granted_app_roles()")).fetchall()
    ]
    report.app_roles = list(dict.fromkeys([*([app_role] if app_role else []), *known]))
    for role in report.app_roles:  # the one asked for always (recorded), others if needed
        granted = await scalar(conn, "SELECT pgrag.app_role_granted(%s)", (role,))
        if owner and (role == app_role or not granted):
            await conn.execute("SELECT pgrag.grant_app_role(%s)", (role,))
        elif not owner and not granted:
            owner_name = await scalar(conn, SCHEMA_OWNER_SQL)
            report.notes.append(
                f"{me} does not own the pgrag schema and cannot grant {role} its tables: "
                f"{owner_name} runs `pgrag migrate --app-role {role}`"
            )


async def _join_scoped(
    conn: psycopg.AsyncConnection, member: str, me: str, report: RoleReport
) -> None:
    """The role pgrag serves as must be able to SET ROLE pgrag_scoped."""
    if await scalar(conn, IS_MEMBER_SQL, (member,)):
        return
    grant = sql.SQL("GRANT pgrag_scoped TO {}").format(sql.Identifier(member))
    if not await _try(conn, grant):
        report.notes.append(
            f"{me} may not grant {SCOPED_ROLE} to {member} (needs CREATEROLE): "
            f"collection-limited API keys are refused for {member} until a role with "
            f"CREATEROLE runs `pgrag migrate --app-role {member}` (or GRANT {SCOPED_ROLE} "
            f"TO {member};)"
        )


async def check_schema(conn: psycopg.AsyncConnection) -> None:
    """For a role that may not migrate: the schema must be current and granted to it, else
    one line saying at which version it is, which this pgrag needs, and who runs what."""
    me = await scalar(conn, "SELECT current_user")
    exists = await scalar(conn, "SELECT to_regnamespace('pgrag') IS NOT NULL")
    if not exists:
        raise DatabaseSetupError(
            f"the pgrag schema does not exist and role {me} may not create it (no CREATE on "
            f"the database): the database's owner or a DBA runs `pgrag migrate --app-role {me}`"
        )
    owner = await scalar(conn, SCHEMA_OWNER_SQL)
    fix = f"{owner} (the schema's owner) runs `pgrag migrate --app-role {me}`"
    if not await scalar(conn, "SELECT has_schema_privilege('pgrag', 'USAGE')"):
        raise DatabaseSetupError(f"role {me} has no access to the pgrag schema: {fix}")
    st = await migrations.status(conn)
    needed = max(m.version for m in migrations.discover())
    if st.pending:
        at = f"{max(st.applied):04d}" if st.applied else "none"
        raise DatabaseSetupError(
            f"the pgrag schema is at version {at}, this pgrag needs {needed:04d} and role {me} "
            f"may not migrate it: {fix}"
        )
    if st.functions_changed:  # same migrations, other functions (another pgrag release)
        raise DatabaseSetupError(
            f"the pgrag schema's functions ({', '.join(st.functions_changed[:3])}) are not "
            f"this pgrag's and role {me} may not replace them: {fix}"
        )
    if not await scalar(conn, "SELECT pgrag.app_role_granted(current_user)"):
        raise DatabaseSetupError(f"role {me} lacks privileges on pgrag's tables: {fix}")
    # pgrag_scoped created by a DBA after the owner's last migrate: its grants follow here
    if await scalar(conn, ROLE_EXISTS_SQL, (SCOPED_ROLE,)) and not await scalar(
        conn, "SELECT pgrag.scoped_role_granted()"
    ):
        async with conn.transaction():  # concurrent GRANTs on one table fail
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (migrations.MIGRATION_LOCK_KEY,))
            await conn.execute("SELECT pgrag.grant_scoped_role()")
