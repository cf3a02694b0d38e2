"""A document's original file (the console's download and page previews): the file it was
ingested from, read again from its folder (an upload's folder under PGRAG_HOME/uploads, or
the folder `pgrag ingest` was given) under the caller's scope, opened component by
component from that folder (ingest/files.py: no `..`, no link leading out, regular files
only), so that a stored path can never name another file."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from pgrag.db.scope import scoped_connection
from pgrag.errors import NotFound
from pgrag.ingest.files import UnsafeFile, open_in_root
from pgrag.services.context import AppContext
from pgrag.services.documents import DocumentRef, resolve

CHUNK_BYTES = 256 * 1024  # a download is streamed in pieces of this size


class FileGone(NotFound):
    """The document was ingested from a file no longer in its folder (moved or deleted)."""


@dataclass(frozen=True)
class Original:
    """An opened original: what the response's headers need, and the file to stream."""

    document_id: str
    name: str
    file_type: str
    size: int
    modified: datetime  # the file's own modification time (not a date inside the file)
    stamp: str  # size and mtime: a changed file is another preview
    file: BinaryIO

    def pieces(self) -> Iterator[bytes]:
        """The file's bytes in pieces; the file is closed at the end."""
        with self.file:
            while piece := self.file.read(CHUNK_BYTES):
                yield piece


async def open_original(context: AppContext, scope: list[str] | None, ref: str) -> Original:
    """NOT_FOUND for a document the caller cannot see (as REST answers), for one saved
    rather than ingested from a file, and for a file no longer in its folder."""
    async with scoped_connection(context.pool, scope) as conn:
        doc = await resolve(conn, ref, scope)
    return open_file(doc, follow_links=context.settings.follow_links_inside_root)


def open_file(doc: DocumentRef, *, follow_links: bool) -> Original:
    root, path = (doc.row.metadata or {}).get("root"), doc.row.path
    detail = {"document_id": doc.id}
    if not isinstance(root, str) or not Path(root).is_absolute():
        raise NotFound(f"'{path}' was saved, not ingested from a file: it has no original file",
                       detail=detail)  # fmt: skip
    try:
        f = open_in_root(Path(root), path, follow_links=follow_links)
    except UnsafeFile as exc:
        raise NotFound(
            f"the file of '{path}' cannot be read: {exc.message}", detail=detail
        ) from None
    except OSError:
        raise FileGone(
            f"the file of '{path}' is no longer in its folder: it was moved or deleted",
            detail=detail,
        ) from None
    st = os.fstat(f.fileno())
    return Original(
        document_id=doc.id,
        name=doc.row.name,
        file_type=doc.row.file_type,
        size=st.st_size,
        modified=datetime.fromtimestamp(st.st_mtime, tz=UTC),
        stamp=f"{st.st_size}:{st.st_mtime_ns}",
        file=f,
    )


def file_modified(doc: DocumentRef, *, follow_links: bool) -> datetime | None:
    """The original's own modification time, None when it is gone (the document page)."""
    with contextlib.suppress(NotFound):
        original = open_file(doc, follow_links=follow_links)
        original.file.close()
        return original.modified
    return None
