"""Operations: `pgrag doctor` on broken set-ups, JSON logs, and the Prometheus `/metrics`
endpoint of a real `pgrag serve --transport http` process."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families
from psycopg.conninfo import make_conninfo

from pgrag.cli.app import JsonLogFormatter
from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database
from tests.support.servers import free_port, wait_http

MODEL = ["--embedding-model", "hash/384"]
API_KEY = "ops-test-key"
ROLE_PASSWORD = "pgrag-limited-role-pw"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The caller's environment without PGRAG_* settings, plus the given ones."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGRAG_")}
    env.update(PGRAG_HOME=str(tmp_path / "home"), OMP_NUM_THREADS="1", **extra)
    return env


def _pgrag(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        pgrag_cmd(*args),
        capture_output=True,
        text=True,
        timeout=180,
        env=_env(tmp_path, **env),
    )


def _lines(proc: subprocess.CompletedProcess[str], prefix: str) -> list[str]:
    return [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith(prefix)]


# --- pgrag doctor ----------------------------------------------------------------------


def test_doctor_passes_on_a_healthy_database(dsn: str, tmp_path: Path) -> None:
    proc = _pgrag(tmp_path, "--database-url", dsn, *MODEL, "doctor")
    assert proc.returncode == 0, proc.stderr
    assert not _lines(proc, "FAIL")
    for name in ("configuration", "embedding model", "database", "server", "pgvector"):
        assert _lines(proc, f"ok   {name}:"), proc.stderr
    assert _lines(proc, "ok   migrations:")


def test_doctor_names_the_fix_when_pgvector_cannot_be_enabled(
    empty_dsn: str, tmp_path: Path
) -> None:
    """An existing Postgres whose pgrag role may not create the vector extension."""
    role = "pgrag_doctor_limited"
    with psycopg.connect(empty_dsn, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {role}")
        # with a password: the test server may demand one (PGRAG_TEST_DATABASE_URL)
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{ROLE_PASSWORD}'")
        conn.execute(f'REVOKE CREATE ON DATABASE "{conn.info.dbname}" FROM PUBLIC')
    try:
        limited = make_conninfo(empty_dsn, user=role, password=ROLE_PASSWORD)
        proc = _pgrag(tmp_path, "--database-url", limited, *MODEL, "doctor")
    finally:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")
    assert proc.returncode == 1, proc.stderr
    assert _lines(proc, "ok   database:"), proc.stderr
    assert _lines(proc, "ok   server: PostgreSQL"), proc.stderr
    [fail] = _lines(proc, "FAIL")
    assert fail.startswith("FAIL pgvector:")
    assert "CREATE EXTENSION vector" in fail and "superuser" in fail
    assert "Traceback" not in proc.stderr


def test_doctor_reports_wrong_credentials_on_the_database_line(
    server_dsn: str, tmp_path: Path
) -> None:
    bad = make_conninfo(server_dsn, user="pgrag_no_such_role", password="wrong-password")
    proc = _pgrag(tmp_path, "--database-url", bad, *MODEL, "doctor")
    assert proc.returncode == 1, proc.stderr
    [fail] = _lines(proc, "FAIL")
    assert fail.startswith("FAIL database: cannot connect to PostgreSQL:")
    assert (
        'role "pgrag_no_such_role" does not exist' in fail
        or "password authentication failed" in fail
    ), fail
    assert "PGRAG_DATABASE_URL" in fail
    assert "Traceback" not in proc.stderr
    assert not _lines(proc, "ok   migrations")


def test_doctor_names_both_models_and_reindex_on_a_mismatch(dsn: str, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# Alpha\n\nzebras and giraffes\n", encoding="utf-8")
    ingest = _pgrag(tmp_path, "--database-url", dsn, *MODEL, "ingest", "-q", str(folder))
    assert ingest.returncode == 0, ingest.stderr

    proc = _pgrag(tmp_path, "--database-url", dsn, "--embedding-model", "hash/128", "doctor")
    assert proc.returncode == 1, proc.stderr
    [fail] = _lines(proc, "FAIL")
    assert fail.startswith("FAIL collection default:")
    assert "hash/384" in fail and "hash/128" in fail
    assert "pgrag reindex --collection default --model hash/128" in fail

    same = _pgrag(tmp_path, "--database-url", dsn, *MODEL, "doctor")
    assert same.returncode == 0, same.stderr
    assert _lines(same, "ok   collection default: hash/384, 384 dimensions")


# --- JSON logs ----------------------------------------------------------------------------


def test_json_formatter_keeps_a_traceback_on_one_line() -> None:
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        record = logging.getLogger("pgrag.test").makeRecord(
            "pgrag.test",
            logging.ERROR,
            __file__,
            1,
            "failed %s",
            ("x",),
            sys.exc_info(),
            extra={"document": "a.pdf"},
        )
    line = JsonLogFormatter().format(record)
    assert "\n" not in line
    obj = json.loads(line)
    assert obj["level"] == "ERROR" and obj["logger"] == "pgrag.test"
    assert obj["message"] == "failed x"
    assert obj["document"] == "a.pdf"
    assert "ValueError: boom" in obj["exc_info"]


def test_json_log_format_from_the_environment(dsn: str, tmp_path: Path) -> None:
    """PGRAG_LOG_FORMAT=json: every log line of a CLI run is one JSON object."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    env = {"PGRAG_LOG_FORMAT": "json", "PGRAG_LOG_LEVEL": "DEBUG"}
    proc = _pgrag(tmp_path, "--database-url", dsn, *MODEL, "ingest", "-q", str(folder), **env)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    records = [json.loads(ln) for ln in lines if ln.startswith("{")]
    assert records, proc.stderr
    assert not [ln for ln in lines if ln.split(" ", 1)[0] in ("DEBUG", "INFO", "WARNING")]
    assert all({"time", "level", "logger", "message"} <= r.keys() for r in records)
    assert any(r["level"] == "DEBUG" for r in records)
    text = _pgrag(tmp_path, "--database-url", dsn, *MODEL, "--log-level", "DEBUG", "status")
    assert text.returncode == 0, text.stderr
    assert any(ln.startswith("DEBUG ") for ln in text.stderr.splitlines())
    assert not any(ln.startswith("{") for ln in text.stderr.splitlines())


# --- pgrag serve --transport http: /metrics -------------------------------------------------


@dataclass
class HttpServer:
    base: str
    log: Path
    folder: Path


@pytest.fixture(scope="module")
def http_server(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpServer]:
    """`pgrag serve --transport http --watch FOLDER` with a bearer key and JSON logs."""
    tmp = tmp_path_factory.mktemp("ops-http")
    folder = tmp / "watched"
    folder.mkdir()
    (folder / "zebra.md").write_text("# Zebras\n\nZebras live in Africa.\n", encoding="utf-8")
    (folder / "giraffe.txt").write_text("Giraffes eat acacia leaves.", encoding="utf-8")
    url = create_database(server_dsn)
    port = free_port()
    log = tmp / "serve.log"
    env = _env(
        tmp,
        PGRAG_DATABASE_URL=url,
        PGRAG_EMBEDDING_MODEL="hash/384",
        PGRAG_API_KEYS=API_KEY,
        PGRAG_LOG_FORMAT="json",
        PGRAG_LOG_LEVEL="INFO",
    )
    cmd = pgrag_cmd("serve", "--transport", "http", "--port", str(port), "--watch", str(folder))
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", timeout=90)
        yield HttpServer(f"http://127.0.0.1:{port}", log, folder)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        drop_database(server_dsn, url)


def _get(url: str, key: str | None = API_KEY) -> tuple[int, str]:
    req = urllib.request.Request(url)
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _sample(server: HttpServer, name: str, **labels: str) -> float:
    status, text = _get(server.base + "/metrics")
    assert status == 200, text
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


def _wait_for_sample(server: HttpServer, name: str, at_least: float, **labels: str) -> float:
    deadline = time.monotonic() + 60
    while (value := _sample(server, name, **labels)) < at_least and time.monotonic() < deadline:
        time.sleep(0.3)
    return value


def test_metrics_needs_the_bearer_key_and_healthz_does_not(http_server: HttpServer) -> None:
    assert _get(http_server.base + "/metrics", key=None)[0] == 401
    assert _get(http_server.base + "/metrics", key="wrong")[0] == 401
    assert _get(http_server.base + "/healthz", key=None)[0] == 200
    status, text = _get(http_server.base + "/metrics")
    assert status == 200
    assert "# TYPE pgrag_search_requests_total counter" in text
    assert "# TYPE pgrag_search_latency_seconds histogram" in text


def test_watched_documents_are_counted(http_server: HttpServer) -> None:
    name = "pgrag_ingest_documents_total"
    assert _wait_for_sample(http_server, name, 2, outcome="added") >= 2
    (http_server.folder / "okapi.md").write_text("# Okapi\n\nforest giraffe\n", encoding="utf-8")
    assert _wait_for_sample(http_server, name, 3, outcome="added") >= 3


def test_rest_searches_are_counted_by_mode_and_outcome(http_server: HttpServer) -> None:
    ok = {"mode": "hybrid", "outcome": "ok"}
    before = _sample(http_server, "pgrag_search_requests_total", **ok)
    seen = _sample(http_server, "pgrag_search_latency_seconds_count", mode="hybrid")
    status, body = _get(http_server.base + "/api/search?" + urllib.parse.urlencode({"q": "zebra"}))
    assert status == 200, body
    assert _sample(http_server, "pgrag_search_requests_total", **ok) == before + 1
    assert _sample(http_server, "pgrag_search_latency_seconds_count", mode="hybrid") == seen + 1

    bad = {"mode": "regex", "outcome": "INVALID_ARGUMENT"}
    before_bad = _sample(http_server, "pgrag_search_requests_total", **bad)
    query = urllib.parse.urlencode({"q": "(unclosed", "mode": "regex"})
    status, body = _get(http_server.base + "/api/search?" + query)
    assert status == 400, body
    assert _sample(http_server, "pgrag_search_requests_total", **bad) == before_bad + 1


def test_mcp_tool_calls_are_counted(http_server: HttpServer) -> None:
    labels = {"tool": "get_status", "outcome": "ok"}
    before = _sample(http_server, "pgrag_tool_calls_total", **labels)

    async def call() -> bool:
        headers = {"Authorization": f"Bearer {API_KEY}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(
                streamable_http_client(http_server.base + "/mcp", http_client=http),
                read_timeout_seconds=30,
            ) as client,
        ):
            result = await client.call_tool("get_status", {})
            return bool(result.is_error)

    assert anyio.run(call) is False
    assert _sample(http_server, "pgrag_tool_calls_total", **labels) == before + 1


def test_http_server_logs_are_json_lines(http_server: HttpServer) -> None:
    assert _get(http_server.base + "/healthz", key=None)[0] == 200
    deadline = time.monotonic() + 10
    while "/healthz" not in http_server.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    lines = [ln for ln in http_server.log.read_text().splitlines() if ln.strip()]
    records = [json.loads(ln) for ln in lines]  # every line is one JSON object
    assert any(r["logger"] == "uvicorn.error" for r in records)
    assert any(r["logger"] == "uvicorn.access" and "/healthz" in r["message"] for r in records)
