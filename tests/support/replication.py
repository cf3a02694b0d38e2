"""A logical-replication publisher and subscriber: two plain clusters of the embedded
PostgreSQL (with pgvector) on loopback, run as the unprivileged user like the Citus nodes
(tests/support/citus.py), with wal_level = logical."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.support.citus import CitusCluster, _free_port, _pginstall, _unprivileged_user


class PlainNode(CitusCluster):
    """One cluster without Citus: `dsn(db)` reaches it over TCP."""

    def _node(self, name: str, port: int) -> None:
        data = self.base / name
        self._pg("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        with (data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"port = {port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.base}'\n"
                "wal_level = logical\nmax_wal_senders = 10\nmax_replication_slots = 10\n"
                "fsync = off\nsynchronous_commit = off\nshared_buffers = 32MB\n"
                "log_min_messages = warning\n"
            )
        self._pg("pg_ctl", "-D", str(data), "-l", str(self.base / f"{name}.log"), "-w", "start")

    def start_plain(self) -> None:
        import os

        self.base.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            entry = _unprivileged_user()
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
        os.chmod(self.base, 0o755)
        self.coordinator_port = _free_port()
        self._node("coordinator", self.coordinator_port)


@contextlib.contextmanager
def replication_pair() -> Iterator[tuple[PlainNode, PlainNode]]:
    pginstall, libs = _pginstall()
    bases = [Path(tempfile.mkdtemp(prefix=f"pgrag-repl-{n}-")) for n in ("pub", "sub")]
    nodes = [PlainNode(pginstall, libs, base) for base in bases]
    try:
        for node in nodes:
            node.start_plain()
        yield nodes[0], nodes[1]
    finally:
        for node in nodes:
            node.stop()
        for base in bases:
            shutil.rmtree(base, ignore_errors=True)
