"""Page previews: a page of a PDF or an image document rendered on the server as a small
PNG, so that a search hit can be read on its page. Bounded: the file's size, the picture's
pixels (MAX_SIDE), the render's memory and time (a child process, killed past its limit:
ingest/page_image.py), renders at once (RENDERS), and the cache of finished pictures
(CACHE_BYTES, least recently used out first; keyed by the file's size and mtime, so a
changed file renders again)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections import OrderedDict
from dataclasses import dataclass

from pgrag.errors import ErrorCode, InvalidArgument, PgragError
from pgrag.ingest.page_image import page_kind
from pgrag.ingest.parsers.limits import MAX_BINARY_BYTES
from pgrag.services.context import AppContext
from pgrag.services.originals import open_original

MAX_SIDE = 1000  # pixels on the longer side
MAX_PAGE = 100_000
RENDER_TIMEOUT_S = 8.0  # within a console GET's 10 s: our TIMEOUT, not the guard's
RENDER_MEMORY_MB = 1024
RENDERS = 2  # child processes rendering at once, per server
CACHE_BYTES = 32 << 20
_NO_SUCH_PAGE = 3  # page_image.main's exit status


@dataclass
class _Cache:
    """PNGs by (document, file stamp, page), at most `limit` bytes together."""

    limit: int
    items: OrderedDict[tuple[str, str, int], bytes]
    size: int = 0

    def get(self, key: tuple[str, str, int]) -> bytes | None:
        png = self.items.get(key)
        if png is not None:
            self.items.move_to_end(key)
        return png

    def put(self, key: tuple[str, str, int], png: bytes) -> None:
        if len(png) > self.limit:
            return
        old = self.items.pop(key, None)
        self.size += len(png) - (len(old) if old else 0)
        self.items[key] = png
        while self.size > self.limit:
            _, dropped = self.items.popitem(last=False)
            self.size -= len(dropped)


def has_pages(file_type: str) -> bool:
    """A file type whose pages can be previewed."""
    return page_kind(file_type) is not None


CACHE = _Cache(CACHE_BYTES, OrderedDict())
_renders: asyncio.Semaphore | None = None


async def page_preview(context: AppContext, scope: list[str] | None, ref: str, page: int) -> bytes:
    """The PNG of page `page` (1-based) of a document the caller can see."""
    if not 1 <= page <= MAX_PAGE:
        raise InvalidArgument(f"page must be between 1 and {MAX_PAGE}", detail={"page": page})
    original = await open_original(context, scope, ref)
    with original.file:
        kind = page_kind(original.file_type)
        if kind is None:
            raise InvalidArgument(
                f"a {original.file_type} file has no page to preview (PDFs and images have)",
                detail={"document_id": original.document_id},
            )
        key = (original.document_id, original.stamp, page)
        if (png := CACHE.get(key)) is not None:
            return png
        if original.size > MAX_BINARY_BYTES:
            raise PgragError("the file is too large to preview", code=ErrorCode.CONTENT_UNAVAILABLE)
        data = await asyncio.to_thread(original.file.read, MAX_BINARY_BYTES)
    png = await _render(data, kind.value, page, original.document_id)
    CACHE.put(key, png)
    return png


async def _render(data: bytes, kind: str, page: int, document_id: str) -> bytes:
    global _renders
    if _renders is None:
        _renders = asyncio.Semaphore(RENDERS)
    args = (kind, str(page), str(MAX_SIDE), str(RENDER_MEMORY_MB))
    async with _renders:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "pgrag.ingest.page_image", *args,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            out, err = await asyncio.wait_for(proc.communicate(data), RENDER_TIMEOUT_S)
        except TimeoutError:
            raise PgragError(
                f"the page took longer than {RENDER_TIMEOUT_S:.0f} s to render",
                code=ErrorCode.TIMEOUT,
                detail={"document_id": document_id, "page": page},
            ) from None
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
    detail = {"document_id": document_id, "page": page}
    if proc.returncode == _NO_SUCH_PAGE:
        raise InvalidArgument(f"no page {page}: {err.decode(errors='replace')}", detail=detail)
    if proc.returncode != 0 or not out:
        reason = err.decode(errors="replace").strip()[-300:] or f"exit {proc.returncode}"
        raise PgragError(
            f"the page could not be rendered ({reason})",
            code=ErrorCode.CONTENT_UNAVAILABLE,
            detail=detail,
        )
    return out
