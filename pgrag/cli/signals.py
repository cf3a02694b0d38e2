"""SIGTERM and SIGHUP stop a command the way Ctrl-C does.

Python's default for SIGTERM/SIGHUP ends the process on the spot: no `finally`, no
`atexit`, so the embedded PostgreSQL a command started kept running and its pid stayed in
`pgdata/.handle_pids.json` (systemd, `docker stop`, `kill`). Routed to the SIGINT handler
instead, they unwind like Ctrl-C: under asyncio the main task is cancelled (transactions roll
back, pools close), in synchronous code KeyboardInterrupt is raised; then `atexit` stops
the cluster. A signal ignored when we start (nohup's SIGHUP) stays ignored.
"""

from __future__ import annotations

import signal
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

_received: int | None = None
_interrupted = False  # KeyboardInterrupt reached the command: Ctrl-C or one of the above


def _on_stop_signal(signum: int, frame: FrameType | None) -> None:
    global _received
    if _received is None:
        _received = signum
    # a server framework that took SIGTERM over (uvicorn) shuts down gracefully on it;
    # otherwise asyncio.Runner's SIGINT handler cancels the main task, and the default
    # one raises KeyboardInterrupt: both what Ctrl-C would do right now
    for other in (signal.SIGTERM, signal.SIGINT):
        handler = signal.getsignal(other)
        if callable(handler) and handler is not _on_stop_signal:
            handler(other, frame)
            return
    raise KeyboardInterrupt  # SIGINT ignored (a background job): stop all the same


def install_stop_handlers() -> None:
    """Route SIGTERM and SIGHUP to the SIGINT handler (unless they are ignored)."""
    for sig in STOP_SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _on_stop_signal)


def ignore_stop_signals() -> None:
    """While exiting: a second signal must not interrupt the cluster's shutdown (atexit)."""
    for sig in (signal.SIGINT, *STOP_SIGNALS):
        signal.signal(sig, signal.SIG_IGN)


def note_interrupted() -> None:
    global _interrupted
    _interrupted = True


def was_stopped() -> bool:
    """A signal stopped the command (and unwound it), rather than the command finishing."""
    return _interrupted or _received is not None


def received_stop_signal() -> str | None:
    """SIGTERM or SIGHUP once one has come (a server framework may have handled it)."""
    return signal.Signals(_received).name if _received else None


def stop_signal_name() -> str:
    """The signal that stopped us: SIGTERM or SIGHUP when one came, else SIGINT."""
    return signal.Signals(_received or signal.SIGINT).name


def stop_exit_code() -> int:
    """128 + the signal number, as a shell reports a process a signal ended."""
    return 128 + int(_received or signal.SIGINT)
