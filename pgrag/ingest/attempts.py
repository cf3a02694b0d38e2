"""Files whose parse never finished: a file that got pgrag killed (out of memory, SIGKILL)
is tried once more, then failed with PARSER_CRASHED instead of killing every later run.

Before a file is parsed a marker file is created and locked (flock) for as long as the
parse runs; it is removed when the parse ends, however it ends. A marker nobody holds a lock
on belongs to a process that died while parsing: the kernel drops a dead process's locks,
so a concurrent run parsing the same file is never mistaken for a crashed one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

from pgrag.ingest.walker import FoundFile

MAX_UNFINISHED = 2  # the first try and one more


def _key(found: FoundFile, content_hash: str) -> str:
    raw = f"{found.root}\0{found.rel}\0{content_hash}".encode()
    return hashlib.sha256(raw).hexdigest()[:32]


def _unlocked(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops the lock taken for the test


def unfinished(directory: Path, found: FoundFile, content_hash: str) -> list[Path]:
    """Markers of earlier attempts at this version of the file whose process died."""
    if not directory.is_dir():
        return []
    return [p for p in directory.glob(_key(found, content_hash) + ".*") if _unlocked(p)]


def forget(markers: list[Path]) -> None:
    for marker in markers:
        marker.unlink(missing_ok=True)


@contextlib.contextmanager
def attempt(directory: Path, found: FoundFile, content_hash: str) -> Iterator[None]:
    """A durable, locked marker for the duration of one parse."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    marker = directory / f"{_key(found, content_hash)}.{uuid.uuid4().hex[:12]}"
    fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, f"{found.rel}\n".encode(errors="backslashreplace"))
        os.fsync(fd)  # written before the parse can take the process down
        yield
    finally:
        marker.unlink(missing_ok=True)
        os.close(fd)
