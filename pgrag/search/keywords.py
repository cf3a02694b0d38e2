"""Query keywords and every place they occur in text, for snippets (提取查询关键词,
定位所有匹配位置). Mirrors the lexical leg: English words matched by a light stem, CJK runs
by their bigrams (so 合同签署 finds 合同 and 签署 in 合同的签署)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import regex

CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{CJK}]+")
_WORD = re.compile(rf"[^\W{CJK}_]+(?:['’.\-][^\W{CJK}_]+)*", re.UNICODE)

STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "our",
        "that",
        "the",
        "their",
        "them",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
        "do",
        "does",
        "did",
        "can",
        "could",
        "should",
        "would",
        "about",
        "after",
        "all",
        "also",
        "any",
        "been",
        "before",
        "being",
        "between",
        "both",
        "each",
        "few",
        "more",
        "most",
        "other",
        "over",
        "same",
        "some",
        "such",
        "than",
        "then",
        "too",
        "under",
        "until",
        "up",
        "very",
        "not",
        "no",
        "nor",
        "only",
        "own",
        "so",
        "just",
        "don",
    ]
)
_SUFFIXES = ("ations", "ation", "ings", "ing", "edly", "ies", "ied", "es", "ed", "s", "ly")


@dataclass(frozen=True)
class Match:
    start: int
    end: int
    keyword: str


def stem(word: str) -> str:
    """A light suffix strip: matching `signed` for `signing` needs no full stemmer."""
    w = word.lower()
    for suffix in _SUFFIXES:
        if len(w) - len(suffix) >= 4 and w.endswith(suffix):
            return w[: -len(suffix)]
    return w


def extract_keywords(query: str) -> list[str]:
    """Distinct keywords in query order: words (no stop words) and CJK bigrams."""
    seen: dict[str, None] = {}
    text = query.replace('"', " ")
    for m in re.finditer(rf"[{CJK}]+|{_WORD.pattern}", text):
        token = m.group(0)
        if _CJK_RUN.fullmatch(token):
            parts = (
                [token] if len(token) <= 2 else [token[i : i + 2] for i in range(len(token) - 1)]
            )
        else:
            low = token.lower().strip(".-'’")
            if (
                low in ("or", "and", "not")
                or low in STOP_WORDS
                or (len(low) < 2 and not low.isdigit())
            ):
                continue
            parts = [low]
        for p in parts:
            seen.setdefault(p, None)
    return list(seen)


def _pattern(keyword: str) -> re.Pattern[str]:
    if _CJK_RUN.fullmatch(keyword):
        return re.compile(re.escape(keyword))
    root = stem(keyword)
    return re.compile(rf"(?<![^\W_]){re.escape(root)}[^\W{CJK}_]*", re.IGNORECASE)


def find_matches(text: str, keywords: list[str]) -> list[Match]:
    found = [Match(m.start(), m.end(), kw) for kw in keywords for m in _pattern(kw).finditer(text)]
    found.sort(key=lambda m: (m.start, -m.end))
    return found


REGEX_TIMEOUT_S = 0.2


def find_regex_matches(text: str, pattern: str, case_sensitive: bool = False) -> list[Match]:
    """Regex mode: the matches themselves are the keywords. Postgres already ran the pattern
    under a statement timeout; here the `regex` module's timeout guards against
    catastrophic backtracking, and syntax it does not share with POSIX yields no matches."""
    flags = 0 if case_sensitive else regex.IGNORECASE
    try:
        found = []
        for m in regex.finditer(pattern, text, flags, timeout=REGEX_TIMEOUT_S):
            if m.end() > m.start():
                found.append(Match(m.start(), m.end(), m.group(0)))
            if len(found) >= 200:
                break
        return found
    except (regex.error, TimeoutError):
        return []


_WORD_BOUNDARY = re.compile(r"(?<!\\)((?:\\\\)*)\\b")


def to_postgres_regex(pattern: str) -> str:
    """A word boundary is `\\b` everywhere but in PostgreSQL, where `\\b` is backspace and
    the word boundary is `\\y`. Agents write `\\b`, so translate it."""
    return _WORD_BOUNDARY.sub(r"\1\\y", pattern)
