"""The seed-004 knowledge base, ingested once per test session, and one `pgrag serve
--transport http` over it (pytest plugin: test modules load it with `pytest_plugins`, so
every module shares the same database and server).

Collections of the shared database:
- `kb`: the knowledge base (small sizes) embedded with the real default model, for
  everything semantic; ~180 chunks, the slow part of the setup.
- `bulk`: the volume files embedded with hash/384 (cheap): a 1 MiB huge_text.txt, a
  3000-row Q4_Forecast.xlsx and BULK_NOTES small notes, so that listings and
  resources/list span several pages. Non-semantic tools and keyword/regex search treat it
  like any collection; the semantic leg of a local-model server never matches it.
- `other`: one note, the only collection the scoped API key may read.

PYTEST_DONT_REWRITE: test modules import constants from here before `pytest_plugins`
registers it, so pytest must not try to rewrite its asserts (they carry their own messages).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from pgrag.mcp.app_state import tool_name
from pgrag.mcp.toolsets.core import handlers
from tests.fixtures.knowledge_base import KB_DIRNAME, build_knowledge_base
from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database
from tests.support.servers import free_port, wait_http

KB_COLLECTION = "kb"
# the tools of the default `core` toolset, as every MCP client should list them: `search`
# and the package's handlers (a new handler is listed with nothing to add here)
CORE_TOOLS = frozenset({"search", *(str(tool_name(h)) for h in handlers())})
BULK_COLLECTION = "bulk"
OTHER_COLLECTION = "other"
HASH_MODEL = "hash/384"
FULL_KEY = "full-key"
SCOPED_KEY = "scoped-key"
API_KEYS = f"{FULL_KEY},{SCOPED_KEY}={OTHER_COLLECTION}"

KB_SHEET_ROWS = 100  # Q1_Budget "Details" rows in the real-model collection
BULK_SHEET_ROWS = 3000  # Q4_Forecast.xlsx rows in the bulk collection
BULK_HUGE_MB = 1
BULK_NOTES = 90
HUGE_PATH = "test-edge-cases/huge_text.txt"
FORECAST_PATH = "Finance/2024/Q4/Q4_Forecast.xlsx"
NOTE_PATH = "bulk-notes/note_{:03d}.txt"
OTHER_PATH = "Other/other_note.txt"
OTHER_TEXT = "Other collection note: the quarterly offsite is in Lisbon (codeword heron)."
INGEST_TIMEOUT_S = 900


@dataclass(frozen=True)
class KnowledgeBase:
    dsn: str
    ids: dict[str, str]  # document path -> document_id
    collections: dict[str, str]  # document path -> collection

    def id(self, path: str) -> str:
        return self.ids[path]

    def sql(self, query: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []

    @contextlib.contextmanager
    def document_status(self, path: str, status: str) -> Iterator[str]:
        """Temporarily give a document another status (processing, failed...)."""
        (old,) = self.sql("SELECT status FROM pgrag.documents WHERE path = %s", (path,))[0]
        self.sql("UPDATE pgrag.documents SET status = %s WHERE path = %s", (status, path))
        try:
            yield self.id(path)
        finally:
            self.sql("UPDATE pgrag.documents SET status = %s WHERE path = %s", (old, path))


@dataclass(frozen=True)
class HttpServer:
    base: str
    dsn: str
    pid: int = 0  # the server process (tests reading its memory use)

    @property
    def mcp_url(self) -> str:
        return self.base + "/mcp"


def _run(cmd: list[str]) -> None:
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=INGEST_TIMEOUT_S, env=child_env()
    )
    assert done.returncode == 0, f"{cmd}\n{done.stdout}\n{done.stderr}"


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGRAG_")}
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra)
    return env


def _build_trees(tmp: Path) -> tuple[Path, Path, Path]:
    """kb/ (real model), bulk/ and other/ (hash model) folder trees."""
    small = build_knowledge_base(tmp / "small", huge_mb=0, big_sheet_rows=KB_SHEET_ROWS)
    kb = tmp / "small" / KB_DIRNAME
    for rel in (HUGE_PATH, FORECAST_PATH):
        small[rel].unlink()
    big = build_knowledge_base(tmp / "big", huge_mb=BULK_HUGE_MB, big_sheet_rows=BULK_SHEET_ROWS)
    bulk = tmp / "bulk"
    for rel in (HUGE_PATH, FORECAST_PATH):
        (bulk / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(big[rel], bulk / rel)
    shutil.rmtree(tmp / "big")
    for i in range(BULK_NOTES):
        note = bulk / NOTE_PATH.format(i)
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(f"Bulk note {i}: inventory count {i * 7} for shelf {i % 9}.\n")
    other = tmp / "other"
    (other / OTHER_PATH).parent.mkdir(parents=True)
    (other / OTHER_PATH).write_text(OTHER_TEXT + "\n", encoding="utf-8")
    return kb, bulk, other


@pytest.fixture(scope="session")
def kb(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KnowledgeBase]:
    dsn = create_database(server_dsn)
    kb_tree, bulk, other = _build_trees(tmp_path_factory.mktemp("kb-server"))
    base = pgrag_cmd("--database-url", dsn)
    hashed = [*base, "--embedding-model", HASH_MODEL, "ingest", "-q", "-c"]
    # the real-model ingestion is the slow part: the hash ones run meanwhile
    real = subprocess.Popen(
        [*base, "ingest", "-q", "-c", KB_COLLECTION, str(kb_tree)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        _run([*hashed, BULK_COLLECTION, str(bulk)])
        _run([*hashed, OTHER_COLLECTION, str(other)])
        out, err = real.communicate(timeout=INGEST_TIMEOUT_S)
    finally:
        if real.poll() is None:
            real.kill()
            real.wait()
    assert real.returncode == 0, f"{out}\n{err}"
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT d.path, d.id::text, c.name FROM pgrag.documents d"
            " JOIN pgrag.collections c ON c.id = d.collection_id"
        ).fetchall()
    yield KnowledgeBase(dsn, {r[0]: r[1] for r in rows}, {r[0]: r[2] for r in rows})
    drop_database(server_dsn, dsn)


def _came_up(proc: subprocess.Popen[bytes], url: str, timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            wait_http(url, timeout=0.5)
            return True
        except OSError:
            continue
    return False


@contextlib.contextmanager
def http_server(
    dsn: str, *flags: str, env: dict[str, str] | None = None, log_path: Path | None = None
) -> Iterator[HttpServer]:
    """`pgrag serve --transport http` on a free port until the block ends (its output in
    `log_path` when given, for tests that read the server's log)."""
    port = free_port()
    cmd = pgrag_cmd(
        "--database-url", dsn, *flags, "serve", "--transport", "http", "--port", str(port)
    )
    with open(log_path, "w+b") if log_path else tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=child_env(**(env or {}))
        )
        base = f"http://127.0.0.1:{port}"
        try:
            if not _came_up(proc, base + "/healthz"):
                proc.kill()
                proc.wait()
                log.seek(0)
                raise AssertionError(f"pgrag serve did not start: {log.read().decode()}")
            yield HttpServer(base, dsn, proc.pid)
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@contextlib.contextmanager
def writable_http_server(server_dsn: str, home: Path) -> Iterator[HttpServer]:
    """A writable server (uploads, deletions: PGRAG_READ_ONLY=false and the `write` toolset)
    with the hash model, on a database of its own so the shared knowledge base never changes."""
    dsn = create_database(server_dsn)
    env = {"PGRAG_READ_ONLY": "false", "PGRAG_TOOLSETS": "core,write", "PGRAG_HOME": str(home)}
    try:
        with http_server(dsn, "--embedding-model", HASH_MODEL, env=env) as server:
            yield server
    finally:
        drop_database(server_dsn, dsn)


@pytest.fixture(scope="session")
def kb_http(kb: KnowledgeBase) -> Iterator[HttpServer]:
    """The shared HTTP server: `full-key` reads everything, `scoped-key` only `other`."""
    with http_server(kb.dsn, "--api-keys", API_KEYS) as server:
        yield server
