"""`python -m pgrag` with memory reports on signals (benchmarks/hostile_memory.py starts the
server through it). Each report is a JSON line appended to $MEMORY_REPORT:

- SIGUSR1: RSS; glibc's `mallinfo2` summed over its arenas (bytes in use, bytes free but
  kept, mmapped blocks) and the number of arenas; with MEMORY_TRACE=1 (tracemalloc from
  the start), the bytes Python objects hold and the source lines whose allocations grew
  most since the last report;
- SIGUSR2: the same, then `malloc_trim(0)` (glibc gives its free pages back) and the RSS
  after it.

What tracemalloc does not see (ONNX Runtime's arena, numpy's buffers are seen) shows as
glibc bytes in use that no Python allocation accounts for."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

TOP_LINES = 12


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",  # non-mmapped bytes from the system (all arenas)
            "ordblks",
            "smblks",
            "hblks",  # mmapped blocks
            "hblkhd",  # bytes in mmapped blocks
            "usmblks",
            "fsmblks",
            "uordblks",  # bytes in use
            "fordblks",  # bytes free, kept by the allocator
            "keepcost",
        )
    ]


_libc = ctypes.CDLL("libc.so.6")
_libc.mallinfo2.restype = _MallInfo2
_libc.fdopen.restype = ctypes.c_void_p
_libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
_libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
_libc.fclose.argtypes = [ctypes.c_void_p]
_previous: list[tracemalloc.Snapshot] = []


def rss_mb() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def arenas() -> int:
    """glibc arenas: the main one plus one per `<arena>` of malloc_info beyond it."""
    import tempfile

    with tempfile.TemporaryFile("w+") as f:
        stream = _libc.fdopen(os.dup(f.fileno()), b"w")
        _libc.malloc_info(0, stream)
        _libc.fclose(stream)
        f.seek(0)
        return f.read().count("<heap nr=")


def report(trim: bool) -> dict[str, Any]:
    mi = _libc.mallinfo2()
    out: dict[str, Any] = {
        "t": round(time.time(), 1),
        "rss_mb": rss_mb(),
        "glibc_in_use_mb": round((mi.uordblks + mi.hblkhd) / 2**20, 1),
        "glibc_free_kept_mb": round(mi.fordblks / 2**20, 1),
        "glibc_mmapped_mb": round(mi.hblkhd / 2**20, 1),
        "glibc_arenas": arenas(),
    }
    if tracemalloc.is_tracing():
        snap = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        out["python_traced_mb"] = round(tracemalloc.get_traced_memory()[0] / 2**20, 1)
        if _previous:
            out["top_growth"] = [
                f"{s.size_diff / 2**20:+.1f} MB ({s.count_diff:+d} blocks) {s.traceback}"
                for s in snap.compare_to(_previous[-1], "lineno")[:TOP_LINES]
            ]
        _previous[:] = [snap]
    if trim:
        _libc.malloc_trim(0)
        out["rss_after_trim_mb"] = rss_mb()
    return out


def _on_signal(signum: int, _frame: Any) -> None:
    line = json.dumps(report(trim=signum == signal.SIGUSR2))
    with open(os.environ["MEMORY_REPORT"], "a", encoding="utf-8") as f:
        f.write(line + "\n")


def main() -> None:
    if os.environ.get("MEMORY_TRACE") == "1":
        tracemalloc.start(1)
    signal.signal(signal.SIGUSR1, _on_signal)
    signal.signal(signal.SIGUSR2, _on_signal)
    here = Path(__file__).resolve().parent  # benchmarks' modules are not pgrag's
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    from pgrag.cli import main as pgrag_main

    sys.argv[0] = "pgrag"
    pgrag_main()


if __name__ == "__main__":
    main()
