"""The console's text in English and Chinese: the language the page's switch chose (a
cookie), else the first the browser's Accept-Language names that the console speaks."""

from __future__ import annotations

from enum import StrEnum

from pgrag.web.text_en import EN
from pgrag.web.text_zh import ZH


class Lang(StrEnum):
    EN = "en"
    ZH = "zh"


MESSAGES: dict[Lang, dict[str, str]] = {Lang.EN: EN, Lang.ZH: ZH}
LANG_COOKIE = "pgrag_lang"  # set by the header's switch (pages/language.py)
NAMES = {Lang.EN: "English", Lang.ZH: "中文"}  # each in its own language


def choose(accept_language: str | None, cookie: str | None = None) -> Lang:
    """The switch's choice, else the first of the browser's languages (by q-value) that
    the console speaks."""
    if cookie in (Lang.EN, Lang.ZH):
        return Lang(cookie)
    ranked: list[tuple[float, int, str]] = []
    for i, part in enumerate((accept_language or "").split(",")):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        ranked.append((-q, i, tag.strip().lower()))
    for neg_q, _, tag in sorted(ranked):
        primary = tag.split("-")[0]
        if neg_q < 0 and primary in (Lang.EN, Lang.ZH):
            return Lang(primary)
    return Lang.EN
