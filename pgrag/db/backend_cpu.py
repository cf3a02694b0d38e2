"""The CPU time a call's PostgreSQL backends spent on it, where the server runs on this host.

Admission charges a call its own cost (services/admission.py). Its wall time, split evenly
among the calls running beside it, undercounts a call that keeps a backend busy (a
backtracking regex) while the others mostly wait: the backend's own CPU time does not. The
pool reads each backend's user + system time from /proc when a call takes a connection and
when the connection comes back; a server on another host (or in another PID namespace)
reports nothing, and the even split alone counts."""

from __future__ import annotations

import contextlib
import contextvars
import os
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field

import psycopg

LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1"}
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


@dataclass
class _Use:
    pid: int
    start: float
    end: float | None = None  # set when the connection is back in the pool


@dataclass
class CallCpu:
    """The backends one call used, and their CPU seconds while it held them."""

    uses: list[_Use] = field(default_factory=list)

    def seconds(self) -> float:
        total = 0.0
        for use in self.uses:
            end = use.end if use.end is not None else cpu_seconds(use.pid)
            if end is not None:
                total += max(0.0, end - use.start)
        return total


_current: contextvars.ContextVar[CallCpu | None] = contextvars.ContextVar(
    "pgrag_call_cpu", default=None
)
_held: weakref.WeakKeyDictionary[psycopg.AsyncConnection, _Use] = weakref.WeakKeyDictionary()
_local: weakref.WeakKeyDictionary[psycopg.AsyncConnection, bool] = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def metering() -> Iterator[CallCpu]:
    """Count the backends the block's connections use (tasks it starts inherit it)."""
    meter = CallCpu()
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process, from /proc; None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * _TICK_S
    except (OSError, IndexError, ValueError):
        return None


def _is_local_backend(conn: psycopg.AsyncConnection) -> bool:
    """The backend is a PostgreSQL process of this host: a Unix socket or a loopback
    address, and /proc names the process postgres (a remote server's PID means nothing)."""
    known = _local.get(conn)
    if known is None:
        host = conn.info.host or ""
        known = host.startswith("/") or host in LOCAL_HOSTS
        if known:
            try:
                with open(f"/proc/{conn.info.backend_pid}/cmdline", "rb") as f:
                    known = f.read().startswith(b"postgres")
            except OSError:
                known = False
        _local[conn] = known
    return known


def taken(conn: psycopg.AsyncConnection) -> None:
    """The pool hands `conn` to the running call: note its backend's CPU time."""
    meter = _current.get()
    if meter is None or not _is_local_backend(conn):
        return
    start = cpu_seconds(conn.info.backend_pid)
    if start is not None:
        use = _Use(conn.info.backend_pid, start)
        meter.uses.append(use)
        _held[conn] = use


def returned(conn: psycopg.AsyncConnection) -> None:
    """`conn` is back (before the pool gives it to anyone else): close its use."""
    use = _held.pop(conn, None)
    if use is not None:
        use.end = cpu_seconds(use.pid) or use.start
