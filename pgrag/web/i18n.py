"""The console's text in English and Chinese, chosen from the browser's Accept-Language."""

from __future__ import annotations

from enum import StrEnum

from pgrag.web.text_en import EN
from pgrag.web.text_zh import ZH


class Lang(StrEnum):
    EN = "en"
    ZH = "zh"


MESSAGES: dict[Lang, dict[str, str]] = {Lang.EN: EN, Lang.ZH: ZH}


def choose(accept_language: str | None) -> Lang:
    """The first of the browser's languages (by q-value) that the console speaks."""
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
