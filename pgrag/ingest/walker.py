"""Which files an ingestion run looks at: folders walked with a default ignore list plus
the root's `.pgragignore` (gitignore syntax)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

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


def ignore_spec(root: Path) -> pathspec.GitIgnoreSpec:
    lines = list(DEFAULT_IGNORES)
    extra = root / IGNORE_FILE
    if extra.is_file():
        lines += extra.read_text(encoding="utf-8", errors="replace").splitlines()
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


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def iter_paths(targets: list[Path]) -> Iterator[tuple[Path, list[FoundFile]]]:
    for t in targets:
        yield walk(t)
