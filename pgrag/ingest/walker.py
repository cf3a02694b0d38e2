"""Which files an ingestion run looks at: folders walked with a default ignore list plus
the root's `.pgragignore` (gitignore syntax). Links and special files are listed too: the
open (files.py) refuses them, so each is reported with its code rather than dropped."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pathspec

from pgrag.ingest.files import UnsafeFile, hash_file, open_in_root

DEFAULT_IGNORES = [
    ".*",  # hidden files and folders: .git, .venv, .DS_Store, editor state
    "node_modules/",
    "__pycache__/",
    "venv/",
    "~$*",
    "*~",
    "*.tmp",
    "*.swp",
    "*.part",
    "*.crdownload",
    "Thumbs.db",
    "desktop.ini",
]
IGNORE_FILE = ".pgragignore"


@dataclass(frozen=True)
class FoundFile:
    root: Path  # the folder ingested; `rel` is the document path inside it
    path: Path
    rel: str

    @property
    def folder(self) -> str:
        return self.rel.rpartition("/")[0]

    def open(self, *, follow_links: bool = False) -> BinaryIO:
        """The file for reading, by the rules of files.py (raises UnsafeFile, OSError)."""
        return open_in_root(self.root, self.rel, follow_links=follow_links)

    def sha256(self, follow_links: bool = False, max_bytes: int | None = None) -> tuple[str, int]:
        """Content hash (hex) and size, read by the same rules (files.hash_file)."""
        with self.open(follow_links=follow_links) as f:
            return hash_file(f, max_bytes)


MAX_IGNORE_FILE_BYTES = 1 << 20


def ignore_spec(root: Path) -> pathspec.GitIgnoreSpec:
    lines = list(DEFAULT_IGNORES)
    try:
        with open_in_root(root, IGNORE_FILE) as f:
            raw = f.read(MAX_IGNORE_FILE_BYTES)
        lines += raw.decode("utf-8", errors="replace").splitlines()
    except (OSError, UnsafeFile):
        pass  # none, or a link / special file: not read
    return pathspec.GitIgnoreSpec.from_lines(lines)


def walk(target: Path) -> tuple[Path, list[FoundFile]]:
    """Files under `target` (a folder, or one file whose folder becomes the root)."""
    target = target.expanduser().resolve()
    if target.is_file():
        return target.parent, [FoundFile(target.parent, target, target.name)]
    if not target.is_dir():
        raise FileNotFoundError(f"no such file or folder: {target}")
    return target, walk_under(target, ignore_spec(target), target)


def walk_under(root: Path, spec: pathspec.GitIgnoreSpec, start: Path) -> list[FoundFile]:
    """Files under `start`, a folder inside `root`, named relative to `root` (watch mode
    scans a folder that was moved in this way)."""
    found: list[FoundFile] = []
    for dirpath, dirnames, filenames in os.walk(start):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = sorted(d for d in dirnames if not spec.match_file(rel_dir + d + "/"))
        for name in sorted(filenames):
            rel = rel_dir + name
            if not spec.match_file(rel):
                found.append(FoundFile(root, Path(dirpath) / name, rel))
    return found


def iter_paths(targets: list[Path]) -> Iterator[tuple[Path, list[FoundFile]]]:
    for t in targets:
        yield walk(t)
