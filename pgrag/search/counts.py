"""What a search's `total_matches` counts. It is the size of the ranked pool, not always a
count of matches: the keyword leg keeps at most `pool_size` matching chunks, and the
semantic leg ranks every chunk by similarity (its `pool_size` nearest), so only keyword and
regex totals are matches; a keyword pool at its cap means at least that many. The CLI's
title and the console's summary say it in these words."""

from __future__ import annotations

from enum import StrEnum

from pgrag.search.models import SearchData
from pgrag.search.modes import ShownScore, mode_spec


class Counted(StrEnum):
    MATCHING = "matching"  # every one matched (keyword, regex)
    AT_LEAST = "at_least"  # matching, and the keyword pool is full: there may be more
    NEAREST = "nearest"  # semantic: the nearest chunks, whatever their similarity
    RANKED = "ranked"  # fused: the candidates ranked, not all of them matches


def counted(data: SearchData, pool_size: int) -> Counted:
    shown = mode_spec(data.mode).score
    if shown is ShownScore.MATCHES:
        return Counted.MATCHING
    if data.scope == "documents":
        return Counted.RANKED
    if shown is ShownScore.LEXICAL and not data.degraded:
        return Counted.AT_LEAST if data.total_matches >= pool_size else Counted.MATCHING
    if shown is ShownScore.SEMANTIC:
        return Counted.NEAREST
    return Counted.RANKED
