"""The OAuth server the OAuth test modules share (`pytest_plugins`): one database and one
`pgrag serve` per session; each test registers its own client."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest

from tests.support.kb_server import HttpServer
from tests.support.oauth import Flow, oauth_database, oauth_server


@pytest.fixture(scope="session")
def oauth_dsn(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    with oauth_database(server_dsn, tmp_path_factory.mktemp("oauth")) as dsn:
        yield dsn


@pytest.fixture(scope="session")
def oauth_http(oauth_dsn: str) -> Iterator[HttpServer]:
    """The OAuth server the test modules share (each test registers its own client)."""
    with oauth_server(oauth_dsn) as s:
        yield s


@pytest.fixture
def flow(oauth_http: HttpServer) -> Iterator[Flow]:
    with httpx2.Client(timeout=30) as http:
        f = Flow(oauth_http.base, http)
        f.register()
        yield f
