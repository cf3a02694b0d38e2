"""Upload (writes on): files dropped or chosen into a collection, accepted by the service
REST uploads use, then followed through pending → processing → ready by static/upload.js,
which polls each document's status (the report of REST /api/status?document=)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, Query, UploadFile
from fastapi.responses import RedirectResponse, Response

from pgrag.errors import ErrorCode, PgragError
from pgrag.jsonable import jsonable
from pgrag.services import documents as docs
from pgrag.services.context import require_remote_writes
from pgrag.services.status import document_status
from pgrag.services.uploads import accept_upload
from pgrag.web import render
from pgrag.web.core import LOGIN_PATH, View, html_errors, view_of

router = APIRouter(include_in_schema=False)
Page = Annotated[View, Depends(view_of)]
MAX_FILES = 20


@router.get("/console/upload")
@html_errors
async def upload_form(view: Page) -> Response:
    if view.caller is None:  # sign in first, then learn whether writes are on
        return view.keep(RedirectResponse(LOGIN_PATH, status_code=303))
    require_remote_writes(view.console.settings)
    return view.page("upload.html", nav="upload", uploaded=[], collection=_own(view))


def _own(view: View) -> str:
    """Where an upload goes unless the user says otherwise: a limited key's own collection
    (it may write nowhere else), the server's default collection for everyone else."""
    scope = view.signed_in.scope
    return scope[0] if scope else view.console.settings.collection


@router.post("/console/upload")
@html_errors
async def upload(
    view: Page,
    files: Annotated[list[UploadFile], File()],
    csrf: Annotated[str, Form(max_length=200)] = "",
    collection: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    caller = view.posted(csrf)
    require_remote_writes(view.console.settings)
    accepted = [
        await accept_upload(
            view.context,
            caller.scope,
            file_name=f.filename,
            collection=collection or None,
            read=f.read,
        )
        for f in files[:MAX_FILES]
        if f.filename
    ]
    return view.page("upload.html", nav="upload", uploaded=accepted, collection=collection)


@router.get("/console/status.json")
async def status(
    view: Page, document: Annotated[str, Query(min_length=1, max_length=1000)]
) -> Response:
    """One document's status and progress, as REST /api/status?document= answers."""
    if view.caller is None:
        return render.data({"isError": True, "errorCode": "UNAUTHORIZED"}, 401)
    try:
        report = document_status(await docs.find(view.context.pool, view.scope, document))
    except PgragError as exc:
        if exc.code == ErrorCode.NOT_FOUND:  # accepted, its ingestion not begun yet
            return render.data({"status": "waiting", "progress": 0})
        body = {"isError": True, "errorCode": str(exc.code), "errorMessage": exc.message}
        return render.data(body, view.console.error_status.get(exc.code, 500))
    return view.keep(render.data(jsonable(report)))
