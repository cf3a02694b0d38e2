"""Opening a file of an ingested folder: regular files inside the root only.

A symlink in a shared or watched folder could otherwise make pgrag index
`/proc/self/environ` (the server's secrets) or `/etc/passwd`, and a FIFO or a link to
`/dev/zero` would block or spin forever. Every path is opened component by component from
the root with `O_NOFOLLOW`, the last one also `O_NONBLOCK`; the descriptor is `fstat`ed and
must be a regular file. Checking at walk time alone is not enough: the file can be swapped
for a link between the walk and the open.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from pgrag.errors import ErrorCode
from pgrag.ingest.parsers.base import ParseError

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | _CLOEXEC
_LINK_ERRNOS = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)
SKIP_CODES = frozenset(
    {ErrorCode.SYMLINK_OUTSIDE_ROOT, ErrorCode.SYMLINK_NOT_FOLLOWED, ErrorCode.NOT_REGULAR_FILE}
)


class UnsafeFile(ParseError):
    """A path the rules forbid reading; `code` is one of SKIP_CODES."""


def open_in_root(root: Path, rel: str, *, follow_links: bool = False) -> BinaryIO:
    """`rel` (a path inside `root`) opened for reading; raises UnsafeFile for a link (one
    staying inside the root is followed when `follow_links`) or anything but a regular file,
    OSError when it is missing or unreadable."""
    parts = PurePosixPath(rel).parts
    if not parts or PurePosixPath(rel).is_absolute() or any(p in ("..", ".") for p in parts):
        raise UnsafeFile(ErrorCode.SYMLINK_OUTSIDE_ROOT, "the path leaves the ingested folder")
    dir_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno in _LINK_ERRNOS:  # a folder on the way was replaced by a link
                    return _linked(root, rel, follow_links)
                raise
            os.close(dir_fd)
            dir_fd = inner
        mode = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False).st_mode
        if stat.S_ISLNK(mode):
            return _linked(root, rel, follow_links)
        if not stat.S_ISREG(mode):
            raise _not_regular(mode)
        try:
            fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in _LINK_ERRNOS:  # swapped for a link since the lstat
                return _linked(root, rel, follow_links)
            raise
    finally:
        os.close(dir_fd)
    return _regular(fd)


def _linked(root: Path, rel: str, follow_links: bool) -> BinaryIO:
    real_root = root.resolve()
    target = Path(os.path.realpath(root / rel))
    if not target.is_relative_to(real_root) or target == real_root:
        raise UnsafeFile(
            ErrorCode.SYMLINK_OUTSIDE_ROOT,
            "a link to a file outside the ingested folder: not read",
        )
    if not follow_links:
        raise UnsafeFile(
            ErrorCode.SYMLINK_NOT_FOLLOWED,
            "a link: not followed (PGRAG_FOLLOW_LINKS_INSIDE_ROOT=true follows links whose "
            "target stays inside the ingested folder)",
        )
    # the target's own path has no link left, so it is opened without following any
    return open_in_root(real_root, target.relative_to(real_root).as_posix())


def _not_regular(mode: int) -> UnsafeFile:
    kind = (
        "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a folder"
        if stat.S_ISDIR(mode)
        else "not a regular file"
    )
    return UnsafeFile(ErrorCode.NOT_REGULAR_FILE, f"{kind}, not a regular file: not read")


def _regular(fd: int) -> BinaryIO:
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


class FileTooLarge(ParseError):
    """A file over its type's bound (parsers/limits.file_bound), known from its size alone:
    never read. `stamp` stands in for its content hash (size and mtime), so an unchanged
    file is skipped on later runs without reading it either."""

    def __init__(self, size: int, mtime_ns: int, limit: int) -> None:
        super().__init__(
            ErrorCode.TOO_LARGE,
            f"the file is {size:,} bytes; files of this type are read up to {limit:,}",
        )
        self.size = size
        self.stamp = f"unhashed:{size}:{mtime_ns}"


def hash_file(f: BinaryIO, max_bytes: int | None = None) -> tuple[str, int]:
    """SHA-256 hex digest and size of an opened file, read from its start; FileTooLarge,
    without reading it, when it is over `max_bytes`."""
    st = os.fstat(f.fileno())
    if max_bytes is not None and st.st_size > max_bytes:
        raise FileTooLarge(st.st_size, st.st_mtime_ns, max_bytes)
    h = hashlib.sha256()
    f.seek(0)
    size = 0
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
        size += len(block)
    f.seek(0)
    return h.hexdigest(), size
