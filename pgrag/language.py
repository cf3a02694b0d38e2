"""Which language a chunk or a query is written in.

The semantic leg corrects for each language's place in the embedding space (a multilingual
model ranks any same-language text above other-language text that answers), so it needs
a language per chunk and per query. The script decides Chinese, Japanese and Korean (kana
means Japanese, hangul Korean, Han alone Chinese); Latin-script text goes to py3langid,
restricted to the common Latin-script languages. Mixed text takes the language of its
majority: a Chinese character counts as one word.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

UNKNOWN = "und"  # ISO 639-2 "undetermined": no letters at all (numbers, codes, empty)
LATIN_LANGUAGES = (
    "en", "de", "fr", "es", "it", "pt", "nl", "sv", "da", "no", "fi", "pl", "cs", "ro", "hu",
    "tr", "id", "vi",
)  # fmt: skip
SAMPLE_CHARS = 2000  # enough to decide; bounds the cost on long chunks

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KANA = re.compile(r"[\u3040-\u30ff\u31f0-\u31ff]")
_HANGUL = re.compile(r"[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")
_LATIN_WORD = re.compile(r"[A-Za-z\u00c0-\u024f]{2,}")


@lru_cache(maxsize=1)
def _identifier() -> Any:
    from py3langid.langid import _load_identifier

    return _load_identifier(langs=list(LATIN_LANGUAGES))


def load() -> None:
    """Load the identifier's model now: it takes about a second, which a server must not
    spend on the event loop of its first search."""
    _identifier()


def detect_language(text: str) -> str:
    """An ISO 639-1 code (zh, ja, ko, en, de, ...) or `und` when the text has no words."""
    sample = text[:SAMPLE_CHARS]
    han = len(_HAN.findall(sample))
    kana = len(_KANA.findall(sample))
    hangul = len(_HANGUL.findall(sample))
    latin_words = len(_LATIN_WORD.findall(sample))
    cjk = han + kana + hangul
    if cjk == 0 and latin_words == 0:
        return UNKNOWN
    if cjk >= latin_words:
        if hangul > han + kana:
            return "ko"
        if kana * 5 >= cjk:  # Japanese mixes kana into Han text; Chinese has none
            return "ja"
        return "zh"
    if latin_words < 3:
        return "en"  # one or two words: too short to tell, and English is the usual case
    lang, _ = _identifier().classify(sample)
    return str(lang)
