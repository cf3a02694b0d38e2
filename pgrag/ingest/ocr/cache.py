"""OCR results on disk under PGRAG_HOME, keyed by the page's pixels + engine + languages.

A file cache, not a table: OCR runs in the parse thread, which holds no database
connection, and a result is worth keeping across collections, reindexing, moved files and
retries after an embedding outage (each re-parses the file). Same pixels, same text.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from PIL import Image

VERSION = "1"  # bump when the stored text's assembly changes


def key(image: Image.Image, engine: str, languages: str) -> str:
    digest = hashlib.sha256()
    digest.update(f"{VERSION}|{engine}|{languages}|{image.mode}|{image.size}|".encode())
    digest.update(image.tobytes())
    return digest.hexdigest()


def get(directory: Path | None, name: str) -> dict[str, Any] | None:
    if directory is None:
        return None
    try:
        value = json.loads((directory / name[:2] / f"{name}.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def put(directory: Path | None, name: str, value: dict[str, Any]) -> None:
    """Atomic write (rename), so a concurrent reader never sees half a file."""
    if directory is None:
        return
    folder = directory / name[:2]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(value, out, ensure_ascii=False)
        os.replace(tmp, folder / f"{name}.json")
    except OSError:
        pass  # a read-only home costs only the cache
