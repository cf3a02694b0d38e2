"""A file uploaded to be ingested (REST POST /api/documents): checked at once, so the client
learns of a bad name or size now rather than from a failed document later; stored under
PGRAG_HOME/uploads and ingested in the background."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from pgrag.display import printable, unsafe_char
from pgrag.errors import Forbidden, InvalidArgument
from pgrag.home import check_home
from pgrag.ingest.parsers import SUPPORTED_EXTENSIONS
from pgrag.services.context import AppContext
from pgrag.services.ingestion import make_ingestor

log = logging.getLogger(__name__)

MAX_UPLOAD_BYTES = 50 * 1024 * 1024
# the ingestions under way: the event loop keeps only a weak reference to a task, so one
# nobody holds may be collected before it ends
_RUNNING: set[asyncio.Task[None]] = set()


@dataclass(frozen=True)
class AcceptedUpload:
    path: str  # the file name: uploads are ingested from their collection's own folder
    collection: str


async def accept_upload(
    context: AppContext,
    scope: list[str] | None,
    *,
    file_name: str | None,
    collection: str | None,
    read: Callable[[int], Awaitable[bytes]],
) -> AcceptedUpload:
    """Check the upload, store it and start its ingestion. `read(n)` reads at most n bytes
    of the upload: only once everything else is known to be acceptable. The caller has
    checked that writes are allowed (require_remote_writes)."""
    settings = context.settings
    col = collection or settings.collection
    if "\x00" in col:
        raise InvalidArgument("the collection name may not contain a NUL character")
    if scope is not None and col not in scope:
        raise Forbidden(f"this key may not write to collection '{col}'")
    name = _checked_name(file_name)
    data = await read(MAX_UPLOAD_BYTES + 1)
    if len(data) > MAX_UPLOAD_BYTES:
        raise InvalidArgument(f"file larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB")
    # the collection name is the client's: never a path (no "..", no absolute path)
    root = settings.home / "uploads" / hashlib.sha256(col.encode()).hexdigest()[:16]
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    check_home(settings.home)  # made writable by others since the start: nothing written
    _write_private(root / name, data)
    start_ingestion(context, root, name, col)
    return AcceptedUpload(path=name, collection=col)


def _write_private(path: Path, data: bytes) -> None:
    """Readable by pgrag's user only (0600), also when it replaces an earlier upload."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(fd, 0o600)
        f.write(data)


def _checked_name(file_name: str | None) -> str:
    """The upload's base name, with a supported extension, at most 255 bytes, no NUL."""
    name = Path(file_name or "upload").name
    ext = Path(name).suffix.lower().lstrip(".")
    if not name or name.startswith(".") or ext not in SUPPORTED_EXTENSIONS:
        raise InvalidArgument(
            "the upload needs a file name with a supported extension: "
            + ", ".join(sorted(SUPPORTED_EXTENSIONS)),
            detail={"file_name": name, "supported": sorted(SUPPORTED_EXTENSIONS)},
        )
    if len(name.encode()) > 255:
        raise InvalidArgument("the file name must be at most 255 bytes")
    if any(unsafe_char(ch) for ch in name):
        raise InvalidArgument(
            "the file name may not contain control characters (NUL, newlines, escapes) or "
            "bidirectional overrides",
            detail={"file_name": printable(name)},
        )
    return unicodedata.normalize("NFC", name)


def start_ingestion(context: AppContext, root: Path, name: str, collection: str) -> None:
    """Ingest file `name` (a path inside `root`) in the background; its outcome is the
    document's status."""
    task = asyncio.get_running_loop().create_task(_ingest(context, root, name, collection))
    _RUNNING.add(task)
    task.add_done_callback(_RUNNING.discard)


async def _ingest(context: AppContext, root: Path, name: str, collection: str) -> None:
    from pgrag.ingest.walker import FoundFile

    try:
        ingestor = make_ingestor(
            context.settings, context.pool, context.provider, collection=collection
        )
        await ingestor.ingest_files(root, [FoundFile(root, root / name, name)])
    except Exception:
        log.exception("ingesting upload %r failed", name)
