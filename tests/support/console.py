"""Fixtures of the console's browser tests (pytest plugin: modules load it with
`pytest_plugins`): one headless Chromium per module, and a writable server (uploads,
deletions, re-ingestion) on a database of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser

from tests.support.browser import chromium
from tests.support.kb_server import HttpServer, writable_http_server


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def writable(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpServer]:
    with writable_http_server(server_dsn, tmp_path_factory.mktemp("pgrag-home")) as server:
        yield server
