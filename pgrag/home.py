"""PGRAG_HOME is trusted: the model graphs pgrag runs, the uploads it ingests, the OCR text it
caches and the parse markers it obeys all live there. A home (or one of those folders) that
another user can write to is not: a planted model graph made every embedding identical, and
a swapped upload was ingested. So pgrag refuses to start on one, in one line naming the
folder and the fix. Folders above the home count too, unless only their owner can rename
entries in them (the sticky bit, as /tmp has)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pgrag.errors import ErrorCode, PgragError

TRUSTED_FOLDERS = ("models", "uploads", "parse-attempts", "ocr-cache")


class UnsafeHome(PgragError):
    code = ErrorCode.UNSAFE_PERMISSIONS


def _refuse(path: Path, st: os.stat_result, *, above: bool) -> None:
    me = os.geteuid()
    what = "a folder above PGRAG_HOME" if above else "PGRAG_HOME or a folder pgrag trusts in it"
    owners = (me, 0) if above else (me,)
    if st.st_uid not in owners:
        raise UnsafeHome(
            f"{path} ({what}) is owned by uid {st.st_uid}, not by pgrag's user ({me}): "
            f"refused; chown it, or point PGRAG_HOME elsewhere",
            detail={"path": str(path)},
        )
    sticky = above and st.st_mode & stat.S_ISVTX
    if st.st_mode & 0o022 and not sticky:
        raise UnsafeHome(
            f"{path} ({what}) is writable by other users (mode {stat.S_IMODE(st.st_mode):o}): "
            f"refused; chmod go-w {path}",
            detail={"path": str(path)},
        )


def check_home(home: Path) -> None:
    """UnsafeHome when the home, the folders pgrag trusts in it (and every upload folder),
    or a folder above it can be written by another user. A home not created yet passes."""
    home = home.expanduser().absolute()
    for parent in home.parents:
        if parent.exists():
            _refuse(parent, parent.stat(), above=True)
    if not home.exists():
        return
    _refuse(home, home.stat(), above=False)
    for name in TRUSTED_FOLDERS:
        folder = home / name
        if folder.is_symlink() or folder.exists():
            _refuse(folder, folder.lstat(), above=False)
    uploads = home / "uploads"
    if uploads.is_dir() and not uploads.is_symlink():
        for entry in uploads.iterdir():
            _refuse(entry, entry.lstat(), above=False)
