"""The header's language switch: the choice is kept in a cookie (read before the browser's
Accept-Language), then the page it was made on loads again."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import RedirectResponse, Response

from pgrag.web.i18n import LANG_COOKIE, Lang

router = APIRouter(include_in_schema=False)
YEAR_S = 365 * 24 * 3600


def local(back: str) -> str:
    """A path of this server to return to; anything else (another site, `//host`): /."""
    if not back.startswith("/") or back.startswith(("//", "/\\")) or any(c < " " for c in back):
        return "/"
    return back


@router.get("/console/lang")
async def switch(to: Lang, back: Annotated[str, Query(max_length=4000)] = "/") -> Response:
    # no session needed: the sign-in page switches too; nothing but the language changes
    response = RedirectResponse(local(back), status_code=303)
    response.set_cookie(LANG_COOKIE, to.value, max_age=YEAR_S, path="/", samesite="lax")
    return response
