"""Smart snippets: keyword windows instead of whole documents, built by these rules.

1. windows of ±context_chars around every keyword match; the width depends on how many
   distinct keywords are near (≥3: ×0.75, 2: ×1, 1: ×1.25 — 300/400/500 at the default 400);
2. window edges extended to the nearest sentence or paragraph end (Latin and CJK punctuation);
3. windows merged when the next starts ≤ 50 characters after the previous ends;
4. score = 10·unique + 1·total + 150/(span+1) + 50·(1 − start/len(text));
5. near-duplicates (Jaccard ≥ 0.9 on normalised character bigrams) keep the better one;
6. order: score desc, unique keywords desc, start asc; at most PGRAG_SEARCH_MAX_SNIPPETS.
Offsets are into the unit's extracted text (`units.body`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from pgrag.search.keywords import Match
from pgrag.search.models import ScoringDetails, Snippet

ALPHA, BETA, GAMMA, DELTA = 10.0, 1.0, 150.0, 50.0
MERGE_GAP = 50
DEDUP_JACCARD = 0.9
EXTEND_LIMIT = 120  # how far an edge may move to reach a sentence boundary
SUMMARY_CHARS = 160

_SENTENCE_END = "。！？!?；;\n"
_LATIN_END = re.compile(r"[.!?](?=\s|$)")


@dataclass
class Window:
    start: int
    end: int
    matches: list[Match] = field(default_factory=list)

    @property
    def keywords(self) -> list[str]:
        seen: dict[str, None] = {}
        for m in self.matches:
            seen.setdefault(m.keyword.lower(), None)
        return list(seen)


def window_chars(unique_near: int, context_chars: int) -> int:
    """§九.2 dynamic window, scaled to the caller's context_chars."""
    if unique_near >= 3:
        return round(context_chars * 0.75)
    if unique_near == 2:
        return context_chars
    return round(context_chars * 1.25)


def _is_boundary_before(text: str, i: int) -> bool:
    """Does a sentence end just before position i?"""
    if i <= 0:
        return True
    prev = text[i - 1]
    return prev in _SENTENCE_END or (prev.isspace() and i >= 2 and text[i - 2] in ".!?")


def extend_start(text: str, start: int, lo: int) -> int:
    """Move left to the start of the sentence (at most EXTEND_LIMIT), else to a space."""
    limit = max(lo, start - EXTEND_LIMIT)
    for i in range(start, limit - 1, -1):
        if _is_boundary_before(text, i) and i >= lo:
            while i < start and text[i].isspace():
                i += 1
            return i
    space = text.rfind(" ", limit, start)
    return space + 1 if space >= limit else start


def extend_end(text: str, end: int, hi: int) -> int:
    """Move right to the end of the sentence (at most EXTEND_LIMIT), else to a space."""
    limit = min(hi, end + EXTEND_LIMIT)
    for i in range(max(end - 1, 0), limit):
        ch = text[i]
        if ch in _SENTENCE_END or (ch in ".!?" and (i + 1 >= len(text) or text[i + 1].isspace())):
            return i + 1 if ch != "\n" else i
    space = text.find(" ", end, limit)
    return space if space != -1 else end


def best_window_end(text: str, lo: int, hi: int, length: int) -> int:
    """A semantic hit without keywords: the chunk's opening, up to the last sentence end
    that keeps it near `length` characters."""
    target = min(hi, lo + length)
    if target >= hi:
        return hi
    for i in range(target, lo + length // 2, -1):
        if text[i - 1] in _SENTENCE_END or (text[i - 1] in ".!?" and text[i].isspace()):
            return i
    return extend_end(text, target, hi)


def _normalise(s: str) -> str:
    return re.sub(r"\s+", "", s).lower()


def _bigrams(s: str) -> set[str]:
    return {s[i : i + 2] for i in range(len(s) - 1)} or {s}


def _overlap(x: set[str], y: set[str]) -> float:
    return len(x & y) / len(x | y) if x | y else 1.0


def jaccard(a: str, b: str) -> float:
    return _overlap(_bigrams(_normalise(a)), _bigrams(_normalise(b)))


def score_window(w: Window, text_len: int) -> tuple[float, ScoringDetails]:
    unique = len(w.keywords)
    total = len(w.matches)
    span = (w.matches[-1].start - w.matches[0].start) if len(w.matches) > 1 else 0
    percent = w.start / text_len if text_len else 0.0
    score = ALPHA * unique + BETA * total + GAMMA / (span + 1) + DELTA * (1 - percent)
    if not w.matches:  # no keyword: only the position bonus
        score = DELTA * (1 - percent)
    details = ScoringDetails(
        unique_keywords=unique, total_keywords=total, span=span, percent_in_doc=round(percent, 4)
    )
    return round(score, 3), details


def near_keywords(matches: list[Match], radius: int) -> list[int]:
    """For each match, how many distinct keywords start within `radius` characters of it:
    one sweep over the matches by start, not a scan of all of them per match."""
    by_start = sorted(range(len(matches)), key=lambda i: matches[i].start)
    starts = [matches[i].start for i in by_start]
    keys = [matches[i].keyword.lower() for i in by_start]
    counts: Counter[str] = Counter()
    near = [0] * len(matches)
    lo = hi = 0
    for pos, i in enumerate(by_start):
        while hi < len(starts) and starts[hi] <= starts[pos] + radius:
            counts[keys[hi]] += 1
            hi += 1
        while starts[lo] < starts[pos] - radius:
            counts[keys[lo]] -= 1
            if not counts[keys[lo]]:
                del counts[keys[lo]]
            lo += 1
        near[i] = len(counts)
    return near


def build_windows(
    text: str, matches: list[Match], context_chars: int, lo: int, hi: int
) -> list[Window]:
    windows = []
    for m, near in zip(matches, near_keywords(matches, context_chars), strict=True):
        w = window_chars(near, context_chars)
        start = extend_start(text, max(lo, m.start - w), lo)
        end = extend_end(text, min(hi, m.end + w), hi)
        windows.append(Window(min(start, m.start), max(end, m.end), [m]))
    return windows


def merge_windows(windows: list[Window], merge_overlapping: bool) -> list[Window]:
    if not merge_overlapping:
        return windows
    merged: list[Window] = []
    for w in sorted(windows, key=lambda w: w.start):
        if merged and w.start <= merged[-1].end + MERGE_GAP:
            merged[-1].end = max(merged[-1].end, w.end)
            merged[-1].matches += w.matches
        else:
            merged.append(Window(w.start, w.end, list(w.matches)))
    for w in merged:
        w.matches.sort(key=lambda m: m.start)
    return merged


def dedupe(snippets: list[Snippet], keep: int | None = None) -> list[Snippet]:
    """Drop near-duplicates, best first. With `keep`, stop once `keep` are kept and the
    rest score lower: they could not reach the first `keep` of `order`."""
    kept: list[tuple[Snippet, set[str]]] = []
    for s in sorted(snippets, key=lambda s: -s.relevance_score):
        if (
            keep is not None
            and len(kept) >= keep
            and s.relevance_score < kept[-1][0].relevance_score
        ):
            break
        grams = _bigrams(_normalise(s.content))
        if all(_overlap(grams, k) < DEDUP_JACCARD for _, k in kept):
            kept.append((s, grams))
    return [s for s, _ in kept]


def order(snippets: list[Snippet]) -> list[Snippet]:
    return sorted(
        snippets,
        key=lambda s: (-s.relevance_score, -len(s.keywords_matched), s.original_char_start),
    )


@dataclass(frozen=True)
class SnippetSource:
    """A slice of a unit's text: `text` is body[base : base + len(text)]."""

    text: str
    base: int
    text_len: int  # length of the whole unit body, for percent_in_doc
    lo: int  # the hit chunk's range inside `text`
    hi: int
    file_id: str
    file_name: str


def make_snippets(
    src: SnippetSource,
    matches: list[Match],
    *,
    context_chars: int,
    merge_overlapping: bool,
    with_details: bool,
) -> list[Snippet]:
    """Snippets for keyword matches inside [lo, hi); a chunk without any match (a semantic
    hit) gets its best sentence-bounded window instead."""
    inside = [m for m in matches if src.lo <= m.start < src.hi]
    if inside:
        windows = merge_windows(
            build_windows(src.text, inside, context_chars, 0, len(src.text)), merge_overlapping
        )
    else:
        windows = [
            Window(src.lo, best_window_end(src.text, src.lo, src.hi, 2 * max(context_chars, 100)))
        ]
    out = []
    for w in windows:
        while w.start < w.end and src.text[w.start].isspace():
            w.start += 1
        while w.end > w.start and src.text[w.end - 1].isspace():
            w.end -= 1
        score, details = score_window(
            Window(src.base + w.start, src.base + w.end, w.matches), src.text_len
        )
        out.append(
            Snippet(
                content=src.text[w.start : w.end],
                file_id=src.file_id,
                file_name=src.file_name,
                keywords_matched=w.keywords,
                original_char_start=src.base + w.start,
                original_char_end=src.base + w.end,
                relevance_score=score,
                scoring_details=details if with_details else None,
            )
        )
    return out


def finalise(snippets: list[Snippet], max_snippets: int) -> list[Snippet]:
    return order(dedupe(snippets, max_snippets))[:max_snippets]


def summary(snippets: list[Snippet]) -> str:
    """§十: the top snippets' short summaries concatenated into `matched_context`."""
    parts = []
    for s in snippets:
        text = " ".join(s.content.split())
        if len(text) > SUMMARY_CHARS:
            first = min(
                (
                    text.lower().find(k.lower())
                    for k in s.keywords_matched
                    if text.lower().find(k.lower()) >= 0
                ),
                default=0,
            )
            start = max(0, first - SUMMARY_CHARS // 3)
            text = ("…" if start else "") + text[start : start + SUMMARY_CHARS] + "…"
        parts.append(text)
    return " … ".join(parts)
