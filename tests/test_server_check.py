import psycopg
import pytest

from pgrag.db.database import prepare
from pgrag.errors import DatabaseError, DatabaseSetupError
from tests.support.databases import with_dbname

pytestmark = pytest.mark.anyio


async def test_unreachable_server_names_the_setting() -> None:
    with pytest.raises(DatabaseError) as info:
        await prepare("postgresql://nobody@127.0.0.1:1/nothing")
    assert "PGRAG_DATABASE_URL" in str(info.value)
    assert "Connection refused" in str(info.value) or "connect" in str(info.value)


async def test_unknown_database_is_a_clear_error(server_dsn: str) -> None:
    with pytest.raises(DatabaseError, match="does not exist"):
        await prepare(with_dbname(server_dsn, "no_such_database_here"))


async def test_missing_privilege_for_pgvector_says_who_must_fix_it(empty_dsn: str) -> None:
    """A user who may not create extensions on a database without pgvector enabled."""
    role = "pgrag_limited_user"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {role}")
        # with a password: the test server may demand one (PGRAG_TEST_DATABASE_URL)
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pgrag-limited-pw'")
        dbname = conn.info.dbname
        conn.execute(f'REVOKE CREATE ON DATABASE "{dbname}" FROM PUBLIC')
    try:
        limited = psycopg.conninfo.make_conninfo(empty_dsn, user=role, password="pgrag-limited-pw")
        with pytest.raises(DatabaseSetupError, match="CREATE EXTENSION vector"):
            await prepare(limited)
    finally:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


async def test_prepare_creates_the_extension(empty_dsn: str) -> None:
    info = await prepare(empty_dsn)
    assert tuple(int(x) for x in info.pgvector_version.split(".")[:2]) >= (0, 7)
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute(
            "SELECT count(*) FROM pg_extension WHERE extname = 'vector'"
        ).fetchone() == (1,)
