"""The console overview's Table sources section follows the queue live: pending rows shown
by the activity poller without a reload (real Chromium against `pgrag serve`; a read-only
server does not drain, so the queue holds still until `pgrag source sync`)."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.browser import chromium, tab
from tests.support.commands import pgrag_cmd
from tests.support.kb_server import child_env, http_server
from tests.support.table_sources import execute, make_tickets

pytestmark = pytest.mark.requires("chromium")

HASH = ("--embedding-model", "hash/384")
KEY = "pgrag_sources_console_key_0123456789"


def _sync(dsn: str) -> None:
    done = subprocess.run(
        pgrag_cmd("--database-url", dsn, *HASH, "source", "sync"),
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(),
    )
    assert done.returncode == 0, done.stderr


def test_sources_section_shows_pending_changes_without_a_reload(dsn: str) -> None:
    make_tickets(dsn)
    execute(dsn, "SELECT pgrag.add_table_source('tickets', ARRAY['body'])")
    _sync(dsn)
    env = {"PGRAG_READ_ONLY": "true"}
    with (
        http_server(dsn, *HASH, "--api-keys", KEY, env=env) as server,
        chromium() as browser,
        tab(browser) as t,
    ):
        t.page.goto(server.base + "/")
        t.page.get_by_label("API key").fill(KEY)
        t.page.get_by_role("button", name="Sign in").click()
        t.page.wait_for_url(server.base + "/")
        row = t.page.locator("#sources tr[data-source=tickets] td")
        assert row.nth(3).inner_text() == "0"  # pending
        loads = []
        t.page.on("load", lambda _: loads.append(1))
        execute(dsn, "INSERT INTO tickets (id, body) VALUES (11, 'a'), (12, 'b')")
        t.page.wait_for_function(
            "() => document.querySelector('#sources tr[data-source=tickets]')"
            ".cells[4].textContent === '2'",
            timeout=30_000,
        )
        _sync(dsn)
        t.page.wait_for_function(
            "() => document.querySelector('#sources tr[data-source=tickets]')"
            ".cells[4].textContent === '0'",
            timeout=30_000,
        )
        assert row.nth(2).inner_text() == "5"  # rows indexed
        assert loads == [] and t.errors == []
