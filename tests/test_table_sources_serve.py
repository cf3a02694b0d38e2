"""Table sources end to end: `pgrag serve` processes draining one queue while writers
write, SIGKILL during the backfill and during a drain, the CLI, metadata filters and a
row's source over REST and MCP, and a key scoped to other collections."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
from typing import Any

import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.commands import pgrag_cmd
from tests.support.kb_server import child_env, http_server
from tests.support.table_sources import execute, make_tickets

HASH = ("--embedding-model", "hash/384")
ADD_SQL = (
    "SELECT pgrag.add_table_source('tickets', ARRAY['body'], title_column => 'subject',"
    " metadata_columns => ARRAY['customer', 'priority'], collection => %s)"
)


# a backfill of 500 rows or more builds the collection's vector index at its end
INDEX_AT_END = {"PGRAG_BACKFILL_INDEX_ROWS": "500"}
INDEX_SQL = """
SELECT i.indisvalid FROM pg_index i JOIN pgrag.collections c
ON i.indexrelid = to_regclass('pgrag.embeddings_hnsw_' || c.active_set_id)
"""


def cli(dsn: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        pgrag_cmd("--database-url", dsn, *HASH, *args),
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(**INDEX_AT_END),
    )
    assert not check or done.returncode == 0, done.stderr
    return done


def wait_until(predicate: Any, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def indexed(dsn: str) -> tuple[int, int, int]:
    """(documents of rows, keys queued, rows)"""
    (row,) = execute(
        dsn,
        "SELECT (SELECT count(*) FROM pgrag.documents WHERE table_source_id IS NOT NULL),"
        " (SELECT coalesce(sum(coalesce(cardinality(keys), 1)), 0)::int"
        "  FROM pgrag.source_queue), (SELECT count(*) FROM tickets)",
    )
    return row


def consistent(dsn: str) -> None:
    """Every row has exactly its current text indexed, with every vector."""
    stale = execute(
        dsn,
        "SELECT t.id FROM tickets t LEFT JOIN pgrag.documents d"
        " ON d.table_source_id IS NOT NULL AND d.source_key = jsonb_build_object('id', t.id)"
        " WHERE d.id IS NULL OR d.status <> 'ready' OR d.vectors_pending <> 0"
        " OR NOT EXISTS (SELECT 1 FROM pgrag.chunks c WHERE c.document_id = d.id"
        "                AND c.content = t.body)",
    )
    assert stale == []
    extra = execute(
        dsn,
        "SELECT d.path FROM pgrag.documents d WHERE d.table_source_id IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM tickets t WHERE jsonb_build_object('id', t.id)"
        "                 = d.source_key)",
    )
    assert extra == []


def _write(dsn: str, ids: range) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i in ids:
            conn.execute(
                "INSERT INTO tickets (id, subject, body, customer, priority)"
                " VALUES (%s, 'Ticket', %s, 'acme', 1)",
                (i, f"Ticket body number w{i} about the printer"),
            )
            if i % 3 == 0:
                conn.execute(
                    "UPDATE tickets SET body = %s WHERE id = %s", (f"Changed body w{i}x", i)
                )
            if i % 7 == 0:
                conn.execute("DELETE FROM tickets WHERE id = %s", (i - 1,))


def test_two_serve_processes_drain_one_queue_while_writers_write(dsn: str) -> None:
    make_tickets(dsn, [])
    execute(dsn, ADD_SQL, ("default",))
    with http_server(dsn, *HASH), http_server(dsn, *HASH):
        writers = [
            threading.Thread(target=_write, args=(dsn, range(start, start + 60)))
            for start in (1000, 2000)
        ]
        for w in writers:
            w.start()
        for w in writers:
            w.join()
        wait_until(lambda: indexed(dsn)[0] == indexed(dsn)[2] and indexed(dsn)[1] == 0)
        wait_until(
            lambda: (
                execute(dsn, "SELECT count(*) FROM pgrag.documents WHERE vectors_pending > 0")
                == [(0,)]
            )
        )
    consistent(dsn)


def test_serve_builds_the_index_after_a_large_backfill_beside_its_drains(dsn: str) -> None:
    """`pgrag serve` drains a 600-row backfill without the collection's vector index, then
    builds it in the background while it goes on draining changes."""
    make_tickets(dsn, [])
    execute(
        dsn,
        "INSERT INTO tickets (id, subject, body, customer, priority)"
        " SELECT g, 'T' || g, 'Row ' || g || ' body text', 'acme', 1 FROM generate_series(1, 600) g",
    )
    execute(dsn, ADD_SQL, ("default",))
    with http_server(dsn, *HASH, env=INDEX_AT_END):
        wait_until(lambda: indexed(dsn) == (600, 0, 600))
        wait_until(lambda: execute(dsn, INDEX_SQL) == [(True,)])
        _write(dsn, range(5000, 5010))  # changes after the build: indexed as usual
        wait_until(lambda: indexed(dsn)[0] == indexed(dsn)[2] and indexed(dsn)[1] == 0)
        wait_until(
            lambda: (
                execute(dsn, "SELECT count(*) FROM pgrag.documents WHERE vectors_pending > 0")
                == [(0,)]
            )
        )
    consistent(dsn)


def _sync_killed(dsn: str, reached: Any) -> None:
    """`pgrag source sync`, SIGKILLed once `reached()` holds."""
    proc = subprocess.Popen(
        pgrag_cmd("--database-url", dsn, *HASH, "source", "sync"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=child_env(**INDEX_AT_END),
    )
    try:
        wait_until(lambda: reached() or proc.poll() is not None, timeout=300)
        assert proc.poll() is None, "the drain ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()


def test_sigkill_during_backfill_and_drain_then_resume(dsn: str) -> None:
    rows = 1200
    make_tickets(dsn, [])
    execute(
        dsn,
        "INSERT INTO tickets (id, subject, body, customer, priority)"
        " SELECT g, 'T' || g, 'Row ' || g || ' body text', 'acme', g %% 3"
        " FROM generate_series(1, %s) g",
        (rows,),
    )
    execute(dsn, ADD_SQL, ("default",))
    _sync_killed(dsn, lambda: indexed(dsn)[0] >= 150)
    (state,) = execute(dsn, "SELECT state, backfill_done FROM pgrag.table_sources")
    assert state[0] == "backfilling" and 0 < state[1] < rows  # killed half way
    assert execute(dsn, INDEX_SQL) == []  # dropped before the backfill, not yet built
    doctor = cli(dsn, "doctor", check=False).stderr
    assert "vector index default" in doctor and "built when the table backfill ends" in doctor
    cli(dsn, "source", "sync")
    assert indexed(dsn) == (rows, 0, rows)
    consistent(dsn)
    assert execute(dsn, INDEX_SQL) == [(True,)]

    execute(dsn, "UPDATE tickets SET body = body || ' edited'")  # one statement, all rows
    assert indexed(dsn)[1] == rows
    _sync_killed(dsn, lambda: indexed(dsn)[1] <= rows - 150)
    assert 0 < indexed(dsn)[1] < rows
    cli(dsn, "source", "sync")
    assert indexed(dsn) == (rows, 0, rows)
    consistent(dsn)
    (dups,) = execute(dsn, "SELECT count(*) - count(DISTINCT path) FROM pgrag.documents")
    assert dups == (0,)


def test_cli_adds_lists_syncs_searches_with_a_filter_and_removes(dsn: str) -> None:
    make_tickets(dsn)
    added = cli(
        dsn,
        "source",
        "add",
        "tickets",
        "--text",
        "body,notes",
        "--title",
        "subject",
        "--metadata",
        "customer,priority",
        "-c",
        "support",
    )
    assert "tickets -> collection support, 3 rows to index" in added.stderr
    (listed,) = json.loads(cli(dsn, "source", "list", "--json").stdout)
    assert (listed["pending"], listed["rows_indexed"], listed["state"]) == (3, 0, "backfilling")
    cli(dsn, "source", "sync")
    (listed,) = json.loads(cli(dsn, "source", "list", "--json").stdout)
    assert (listed["pending"], listed["rows_indexed"], listed["state"]) == (0, 3, "ready")
    found = json.loads(
        cli(
            dsn,
            "search",
            "the",
            "-m",
            "keyword",
            "-c",
            "support",
            "--metadata",
            "customer=acme",
            "--json",
        ).stdout
    )
    assert {h["path"] for h in found["results"]} == {"tables/tickets/1", "tables/tickets/3"}
    assert {json.dumps(h["source"]["key"]) for h in found["results"]} == {'{"id": 1}', '{"id": 3}'}
    status = json.loads(cli(dsn, "status", "--json").stdout)
    assert [(s["name"], s["rows_indexed"], s["pending"]) for s in status["sources"]] == [
        ("tickets", 3, 0)
    ]
    cli(dsn, "source", "remove", "tickets")
    assert json.loads(cli(dsn, "source", "list", "--json").stdout) == []
    assert execute(dsn, "SELECT count(*) FROM pgrag.documents") == [(0,)]
    missing = cli(dsn, "source", "add", "tickets", "--text", "nope", check=False)
    assert missing.returncode == 1
    assert missing.stderr.strip() == "pgrag: INVALID_ARGUMENT: tickets has no column nope"


FULL, SCOPED = "full-key", "scoped-key"


@pytest.mark.anyio
async def test_rest_and_mcp_filter_by_metadata_show_the_row_and_respect_scopes(dsn: str) -> None:
    make_tickets(dsn)
    execute(dsn, ADD_SQL, ("support",))
    cli(dsn, "source", "sync")
    with http_server(dsn, *HASH, "--api-keys", f"{FULL},{SCOPED}=other") as server:
        async with httpx2.AsyncClient(base_url=server.base, timeout=60) as http:
            full = {"Authorization": f"Bearer {FULL}"}
            r = await http.get(
                "/api/search",
                headers=full,
                params={"q": "the", "mode": "keyword", "metadata": "customer=acme"},
            )
            assert r.status_code == 200, r.text
            hits = r.json()["results"]
            assert {h["path"] for h in hits} == {"tables/tickets/1", "tables/tickets/3"}
            assert all(h["source"]["table"] == "tickets" for h in hits)
            r = await http.get(
                "/api/search",
                headers=full,
                params={"q": "the", "mode": "keyword", "metadata": "priority=2"},
            )
            assert {h["path"] for h in r.json()["results"]} == {"tables/tickets/2"}
            r = await http.get("/api/search", headers=full, params={"q": "x", "metadata": "oops"})
            assert r.status_code == 400 and r.json()["errorCode"] == "INVALID_ARGUMENT"
            scoped = {"Authorization": f"Bearer {SCOPED}"}
            for mode in ("keyword", "hybrid", "semantic", "regex"):
                r = await http.get(
                    "/api/search",
                    headers=scoped,
                    params={"q": "E1042" if mode != "regex" else "E10", "mode": mode},
                )
                assert all(
                    not h["path"].startswith("tables/") for h in r.json().get("results", [])
                ), mode
        async with (
            httpx2.AsyncClient(headers=full, timeout=60) as hc,
            Client(streamable_http_client(server.mcp_url, http_client=hc), cache=None) as client,
        ):
            result = await client.call_tool(
                "search",
                {"query": "the", "mode": "keyword", "filters": {"metadata": {"customer": "acme"}}},
            )
            data = result.structured_content["data"]
            assert {h["path"] for h in data["results"]} == {"tables/tickets/1", "tables/tickets/3"}
            assert {h["source"]["key"]["id"] for h in data["results"]} == {1, 3}
            status = (await client.call_tool("get_status", {})).structured_content["data"]
            (src,) = status["sources"]
            assert (src["name"], src["rows_indexed"], src["pending"]) == ("tickets", 3, 0)
        async with httpx2.AsyncClient(base_url=server.base, timeout=60) as http:
            text = (await http.get("/metrics", headers=full)).text
            assert 'pgrag_source_pending{source="tickets"} 0.0' in text
            assert 'pgrag_source_lag_seconds{source="tickets"}' in text
            r = await http.get("/api/status", headers={"Authorization": f"Bearer {SCOPED}"})
            assert r.json()["sources"] == []  # another collection's source is not shown
            # a column dropped under the live source: the server's drain marks it failed,
            # and the console's overview shows the reason
            execute(dsn, "ALTER TABLE tickets DROP COLUMN customer")
            execute(dsn, "UPDATE tickets SET body = 'Changed again' WHERE id = 1")
            wait_until(
                lambda: execute(dsn, "SELECT state FROM pgrag.table_sources") == [("failed",)]
            )
            login = await http.get("/console/login")
            csrf = re.search(r'name="csrf" value="([^"]+)"', login.text)
            assert csrf is not None
            signed = await http.post("/console/login", data={"key": FULL, "csrf": csrf.group(1)})
            assert signed.status_code == 303
            page = (await http.get("/")).text
            assert 'id="sources"' in page and 'data-source="tickets"' in page
            assert "column customer of tickets is gone" in page
