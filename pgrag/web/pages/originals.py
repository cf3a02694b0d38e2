"""A document's original file: its download, and a page rendered as a picture (the preview
beside a PDF's or an image's hit). Scoped like the document page: another collection's
document answers 404."""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response, StreamingResponse
from markupsafe import escape

from pgrag.services.originals import FileGone, open_original
from pgrag.services.previews import MAX_PAGE, page_preview
from pgrag.web.core import View, html_errors, view_of
from pgrag.web.i18n import MESSAGES
from pgrag.web.render import SECURITY_HEADERS

router = APIRouter(include_in_schema=False)
Page = Annotated[View, Depends(view_of)]
# never shown as a page of ours, whatever the file holds: saved, not rendered (attachment),
# its type not guessed from its bytes (nosniff), scripts off were it opened (sandbox)
FILE_HEADERS = {**SECURITY_HEADERS, "Content-Security-Policy": "default-src 'none'; sandbox"}
_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]")


def attachment(name: str) -> str:
    """Content-Disposition for a download: an ASCII name for old clients, the UTF-8 one
    (RFC 6266 `filename*`) for the rest; no quote, backslash or line break gets through."""
    plain = _UNSAFE.sub("_", name) or "download"
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name, safe='')}"


@router.get("/console/documents/{document_id}/original")
@html_errors
async def download(view: Page, document_id: str) -> Response:
    original = await open_original(view.context, view.scope, document_id)
    headers = {
        **FILE_HEADERS,
        "Content-Disposition": attachment(original.name),
        "Content-Length": str(original.size),
        "Last-Modified": original.modified.strftime("%a, %d %b %Y %H:%M:%S GMT"),
    }
    response = StreamingResponse(
        original.pieces(), media_type="application/octet-stream", headers=headers
    )
    return view.keep(response)


@router.get("/console/documents/{document_id}/preview")
@html_errors
async def preview(
    view: Page, document_id: str, page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1
) -> Response:
    try:
        png = await page_preview(view.context, view.scope, document_id, page)
    except FileGone:  # a picture saying so, where a broken one would show
        return view.keep(gone_picture(MESSAGES[view.lang]))
    # the same picture for the same key and file: the browser may keep it a while
    headers = {**FILE_HEADERS, "Cache-Control": "private, max-age=300"}
    return view.keep(Response(png, media_type="image/png", headers=headers))


def gone_picture(t: dict[str, str]) -> Response:
    """The preview of a file removed since ingestion: a picture that says the file is gone.
    Sent 200 (a 404 would put a load error in the page's console, though the picture shows)
    with the stable code in `X-Pgrag-Error`; never cached (no-store), so it goes when the
    file is back."""
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" width="480" height="200" viewBox="0 0 480 200"'
        f' role="img" aria-label="{escape(t["file_gone"])}">'
        '<rect width="480" height="200" fill="#f4f4f4" stroke="#999" stroke-dasharray="6 4"/>'
        '<text x="240" y="95" text-anchor="middle" font-family="sans-serif" font-size="22"'
        f' fill="#444">{escape(t["file_gone"])}</text>'
        '<text x="240" y="130" text-anchor="middle" font-family="sans-serif" font-size="13"'
        f' fill="#666">{escape(t["file_gone_help"])}</text></svg>'
    )
    headers = {**FILE_HEADERS, "X-Pgrag-Error": "NOT_FOUND"}
    return Response(svg, media_type="image/svg+xml", headers=headers)
