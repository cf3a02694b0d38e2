"""The embedded cluster: start, reuse, concurrent starts, stale pid after a crash, as root."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.support.commands import pgrag_cmd


def _home() -> Path:
    return Path(tempfile.mkdtemp(prefix="pgrag-home-"))


def _run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        pgrag_cmd("--home", str(home), *args), capture_output=True, text=True, timeout=180
    )


def _postmaster_pid(home: Path) -> int | None:
    pidfile = home / "pgdata" / "postmaster.pid"
    return int(pidfile.read_text().splitlines()[0]) if pidfile.exists() else None


def _stop(home: Path) -> None:
    pid = _postmaster_pid(home)
    if pid and psutil.pid_exists(pid):
        os.kill(pid, signal.SIGTERM)
        psutil.Process(pid).wait(10)


@pytest.fixture
def home() -> Iterator[Path]:
    h = _home()
    yield h
    _stop(h)
    subprocess.run(["rm", "-rf", str(h)], check=False)


def _psql(home: Path, sql: str) -> str:
    r = subprocess.run(
        pgrag_cmd("--home", str(home), "psql", "--", "-X", "-A", "-t", "-c", sql),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_first_start_initialises_then_reuses_the_cluster(home: Path) -> None:
    first = _run(home, "migrate")
    assert first.returncode == 0, first.stderr
    assert (home / "pgdata" / "PG_VERSION").read_text().strip() == "18"
    _psql(home, "CREATE TABLE public.marker (x int); INSERT INTO public.marker VALUES (42)")
    # the CLI stops the cluster when the last pgrag process exits, and reuses the data later
    assert _postmaster_pid(home) is None or not psutil.pid_exists(_postmaster_pid(home) or 0)
    assert _psql(home, "SELECT x FROM public.marker") == "42"
    second = _run(home, "migrate")
    assert second.returncode == 0 and "applied" not in second.stdout


def test_two_processes_starting_at_once_share_one_cluster(home: Path) -> None:
    procs = [
        subprocess.Popen(
            pgrag_cmd("--home", str(home), "migrate"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    assert sum(out.count("applied 0001") for out, _ in results) == 1


def test_recovers_from_a_stale_pid_file_after_a_crash(home: Path) -> None:
    # keep a server running (no cleanup), then kill -9 its postmaster: postmaster.pid stays
    starter = (
        "import sys; from pathlib import Path; from pgrag.db.embedded import start_embedded; "
        "print(start_embedded(Path(sys.argv[1]), cleanup_mode=None))"
    )
    r = subprocess.run(
        [sys.executable, "-c", starter, str(home)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    pid = _postmaster_pid(home)
    assert pid and psutil.pid_exists(pid)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (home / "pgdata" / "postmaster.pid").exists()  # stale
    again = _run(home, "migrate")
    assert again.returncode == 0, again.stderr
    assert _psql(home, "SELECT count(*) > 0 FROM pgrag.schema_migrations") == "t"


@pytest.mark.skipif(os.geteuid() != 0, reason="only meaningful when the tests run as root")
def test_as_root_the_cluster_runs_as_an_unprivileged_user(home: Path) -> None:
    assert _run(home, "migrate").returncode == 0
    owner = (home / "pgdata").stat().st_uid
    assert owner != 0
