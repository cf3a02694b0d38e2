"""Query keywords and every place they occur in text, for snippets (提取查询关键词,
定位所有匹配位置). Mirrors the lexical leg: English words matched by a light stem, CJK runs
by their bigrams (so 合同签署 finds 合同 and 签署 in 合同的签署)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Protocol

import regex

from pgrag import deadline

CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{CJK}]+")
_WORD = re.compile(rf"[^\W{CJK}_]+(?:['’.\-][^\W{CJK}_]+)*", re.UNICODE)
_WORD_TAIL = re.compile(rf"[^\W{CJK}_]*")

# Highlighting is bounded whatever the query: at most MAX_KEYWORDS distinct keywords (the
# lexical leg reads no more words either); in regex mode at most REGEX_BUDGET_S for all the
# windows of a request together, REGEX_WINDOW_S for one (the `regex` module counts CPU
# time, which a loaded machine stretches: a pattern that needs more for one window is
# stopped for the whole request), and MAX_REGEX_MATCHES per window.
MAX_KEYWORDS = 100
REGEX_BUDGET_S = 1.0
REGEX_WINDOW_S = 0.25
MAX_REGEX_MATCHES = 200

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
    """Distinct keywords in query order: words (no stop words) and CJK bigrams, the first
    MAX_KEYWORDS of them."""
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
            if len(seen) == MAX_KEYWORDS:
                return list(seen)
    return list(seen)


class Matcher(Protocol):
    """What finds a request's matches in each window of its hits."""

    @property
    def exhausted(self) -> bool:
        """Did matching stop early (its time budget spent)?"""
        ...

    def find(self, text: str) -> list[Match]: ...


class KeywordMatcher:
    """Every keyword of a query in one pattern, compiled once per request and reused for
    every window. A word matches at a word start by its stem, to the end of the word; a
    CJK keyword matches as it is. Matches of one keyword never overlap; those of two may."""

    exhausted = False

    def __init__(self, keywords: list[str]) -> None:
        self.keywords = keywords
        self._roots: dict[str, list[int]] = {}  # root -> its keywords' indexes
        for i, kw in enumerate(keywords):
            self._roots.setdefault(stem(kw) if _is_word(kw) else kw, []).append(i)
        # longest first: the pattern reports the longest root at a position, and the same
        # pattern cut short of its end reports the next shorter one there
        roots = sorted(self._roots, key=len, reverse=True)
        self._names = {f"r{j}": root for j, root in enumerate(roots)}
        # the group marking a root is empty and last: `re` skips an alternative whose
        # first character differs without entering it
        alternatives = [f"{re.escape(r)}(?P<r{j}>)" for j, r in enumerate(roots)]
        words = "|".join(a for a, r in zip(alternatives, roots, strict=True) if _is_word(r))
        cjk = "|".join(a for a, r in zip(alternatives, roots, strict=True) if not _is_word(r))
        branches = [rf"(?<![^\W_])(?=(?:{words}))"] if words else []
        branches += [f"(?=(?:{cjk}))"] if cjk else []
        self._pattern = re.compile("|".join(branches), re.IGNORECASE)
        for root in roots:  # roots equal but for case ('ſign', 'sign'): the one reported
            itself = self._pattern.match(root, 0, len(root))
            same = self._names[itself.lastgroup] if itself and itself.lastgroup else root
            if same != root:
                self._roots[same] += self._roots.pop(root)

    def find(self, text: str) -> list[Match]:
        if not self.keywords:
            return []
        found: list[tuple[int, int, int]] = []  # (start, end, keyword index)
        resume = [0] * len(self.keywords)  # where each keyword's next match may start
        for first in self._pattern.finditer(text):
            start = first.start()
            m: re.Match[str] | None = first
            while m is not None:
                root = self._names[m.lastgroup or ""]
                end = start + len(root)
                tail = _WORD_TAIL.match(text, end) if _is_word(root) else None
                end = tail.end() if tail else end
                for i in self._roots[root]:
                    if start >= resume[i]:
                        resume[i] = end
                        found.append((start, end, i))
                m = self._pattern.match(text, start, start + len(root) - 1)
        found.sort(key=lambda f: (f[0], -f[1], f[2]))
        return [Match(start, end, self.keywords[i]) for start, end, i in found]


def _is_word(root: str) -> bool:
    return not _CJK_RUN.fullmatch(root)


def find_matches(text: str, keywords: list[str]) -> list[Match]:
    """Every match of `keywords` in `text`, by start (longest first at one start)."""
    return KeywordMatcher(keywords).find(text)


class RegexMatcher:
    """Regex mode: the matches themselves are the keywords. Postgres already ran the pattern
    under a statement timeout; here the windows of a request share REGEX_BUDGET_S (and the
    call's own time limit), and the `regex` module runs without the GIL, stopped by its
    timeout. Once stopped, the request's other windows go without highlights. Syntax the
    module does not share with POSIX yields no matches."""

    def __init__(self, pattern: str, case_sensitive: bool = False) -> None:
        flags = 0 if case_sensitive else regex.IGNORECASE
        try:
            self._pattern: regex.Pattern[str] | None = regex.compile(pattern, flags)
        except regex.error:
            self._pattern = None
        self._ends = time.monotonic() + REGEX_BUDGET_S
        self.exhausted = False

    def _left(self) -> float:
        left = min(self._ends - time.monotonic(), REGEX_WINDOW_S)
        call_left = deadline.remaining()
        return left if call_left is None else min(left, call_left)

    def find(self, text: str) -> list[Match]:
        left = self._left()
        if self._pattern is None or self.exhausted or left <= 0:
            self.exhausted = self.exhausted or left <= 0
            return []
        found = []
        try:
            for m in self._pattern.finditer(text, timeout=left, concurrent=True):
                if m.end() > m.start():
                    found.append(Match(m.start(), m.end(), m.group(0)))
                if len(found) >= MAX_REGEX_MATCHES:
                    break
        except TimeoutError:
            self.exhausted = True
            return []
        return found


def find_regex_matches(text: str, pattern: str, case_sensitive: bool = False) -> list[Match]:
    return RegexMatcher(pattern, case_sensitive).find(text)


_WORD_BOUNDARY = re.compile(r"(?<!\\)((?:\\\\)*)\\b")


def to_postgres_regex(pattern: str) -> str:
    """A word boundary is `\\b` everywhere but in PostgreSQL, where `\\b` is backspace and
    the word boundary is `\\y`. Agents write `\\b`, so translate it."""
    return _WORD_BOUNDARY.sub(r"\1\\y", pattern)
