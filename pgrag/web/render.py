"""Rendering: the Jinja2 environment over the package's templates, the security headers
every console response carries, and the filters templates use."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from fastapi.responses import HTMLResponse, JSONResponse
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

# no inline script or style anywhere: every script and stylesheet is a file of this package
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "object-src 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # no-referrer would send `Origin: null` with forms
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}


# letters and digits of scripts written with spaces between words (not CJK, kana, hangul):
# a term starting or ending with one is marked only where the word starts or ends there
_SPACED = r"[^\W\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]"
_IS_SPACED = re.compile(_SPACED)


def _bounded(term: str) -> str:
    """The term's pattern: "EU" never inside "EUR"; a Chinese term anywhere (no spaces);
    a word of 4 letters or more with the short ending search matches too (heron: herons,
    as keywords.stem strips it), marked whole."""
    before = f"(?<!{_SPACED})" if _IS_SPACED.match(term[0]) else ""
    after = ""
    if _IS_SPACED.match(term[-1]):
        after = (f"{_SPACED}{{0,4}}" if len(term) >= 4 else "") + f"(?!{_SPACED})"
    return before + re.escape(term) + after


def highlight(text: str, words: Iterable[str]) -> Markup:
    """The text, escaped, with each matched keyword in <mark>: whole words only (matched
    on the text, then escaped, so a term never lands inside an HTML entity)."""
    terms = sorted({w.strip() for w in words if w.strip()}, key=len, reverse=True)
    if not terms:
        return escape(text)
    pattern = re.compile("|".join(_bounded(t) for t in terms), re.IGNORECASE)
    out, last = [], 0
    for m in pattern.finditer(text):
        out.append(f"{escape(text[last : m.start()])}<mark>{escape(m.group(0))}</mark>")
        last = m.end()
    out.append(str(escape(text[last:])))
    return Markup("".join(out))


def human_bytes(n: int | None) -> str:
    if n is None:
        return ""
    if n < 1024:
        return f"{n} B"
    size, unit = n / 1024, "KB"
    for bigger in ("MB", "GB", "TB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:.1f} {unit}"


def figure(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def exact(value: float | int | None) -> str:
    """A figure as the JSON of MCP and REST writes it (data attributes the tests compare)."""
    return "" if value is None else repr(value)


ENV = Environment(
    loader=PackageLoader("pgrag.web", "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.filters.update(highlight=highlight, bytes=human_bytes, figure=figure, exact=exact)


def page(name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    html = ENV.get_template(name).render(**context)
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def data(body: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=SECURITY_HEADERS)
