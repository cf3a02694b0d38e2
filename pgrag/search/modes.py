"""The search modes, in one table: which legs a mode runs, whether it needs the query's
vector, which SQL ranks it and which score its hits show. Engine, ranking, hits, CLI,
evaluation and every transport read a mode's behaviour here, never from its name."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class SearchMode(StrEnum):
    HYBRID = "hybrid"
    SEMANTIC = "semantic"
    KEYWORD = "keyword"
    EXACT = "exact"  # another name for keyword
    REGEX = "regex"


@dataclass(frozen=True)
class Ranker:
    """A row of the rankers' table: the SQL function that orders a mode's hits. Every
    ranker function takes the same arguments by name (the query's words or pattern, its
    vector, the scope, collections, filters, page, `opts pgrag.ranking_options`, ...:
    sql/functions/56_rankers.sql) and returns RankedRow's columns by name, so the search
    calls any of them alike (search/ranking.py) and a new one is a row and its SQL."""

    name: str
    function: str  # pgrag.<function>, named here only: never from a request
    # the query is a POSIX pattern, not words: sent translated (to_postgres_regex), ranked
    # under PGRAG_REGEX_TIMEOUT_MS (a pattern can backtrack for ever), no keywords, no
    # language, no explain replay
    pattern: bool = False


FUSION = Ranker("fusion", "rank_fused")  # pgrag.hybrid_search and variants, legs weighted
REGEX = Ranker("regex", "rank_regex", pattern=True)  # pgrag.regex_search, by matches
RANKERS: tuple[Ranker, ...] = (FUSION, REGEX)


class ShownScore(StrEnum):
    """The number a hit shows as `score`: what its mode ranked by."""

    FUSED = "fused"
    SEMANTIC = "semantic"  # cosine similarity
    LEXICAL = "lexical"  # BM25 (the fused score when the semantic leg answered instead)
    MATCHES = "matches"  # regex matches in the chunk


@dataclass(frozen=True)
class ModeSpec:
    name: SearchMode  # what the search reports and logs (exact reports keyword)
    lexical: bool  # runs the BM25 leg
    semantic: bool  # runs the vector leg, so it embeds the query first
    semantic_fallback: bool  # a query without searchable words is answered by the vector leg
    ranker: Ranker
    score: ShownScore
    rerankable: bool  # ranked by relevance, so a rerank model may reorder its first ranks
    replayable: bool  # pgrag.explain_search / explain_parts replay its fused scores
    description: str  # shown in every transport's help and in the docs

    @property
    def pattern(self) -> bool:
        """The query is a pattern, not words: no keywords, no language, no explain replay."""
        return self.ranker.pattern


_KEYWORD = ModeSpec(
    SearchMode.KEYWORD, lexical=True, semantic=False, semantic_fallback=True,
    score=ShownScore.LEXICAL, ranker=FUSION, rerankable=True, replayable=True,
    description='the words or a "quoted phrase" (BM25)',
)  # fmt: skip
MODES: dict[SearchMode, ModeSpec] = {
    SearchMode.HYBRID: ModeSpec(
        SearchMode.HYBRID, lexical=True, semantic=True, semantic_fallback=False,
        score=ShownScore.FUSED, ranker=FUSION, rerankable=True, replayable=True,
        description="words and meaning fused (the default; questions and topics)",
    ),
    SearchMode.SEMANTIC: ModeSpec(
        SearchMode.SEMANTIC, lexical=False, semantic=True, semantic_fallback=False,
        score=ShownScore.SEMANTIC, ranker=FUSION, rerankable=True, replayable=True,
        description="meaning only (cosine similarity; works across languages)",
    ),
    SearchMode.KEYWORD: _KEYWORD,
    SearchMode.EXACT: _KEYWORD,
    SearchMode.REGEX: ModeSpec(
        SearchMode.REGEX, lexical=False, semantic=False, semantic_fallback=False,
        ranker=REGEX, score=ShownScore.MATCHES, rerankable=False, replayable=False,
        description="a POSIX pattern such as an e-mail address or a contract number, by matches",
    ),
}  # fmt: skip
# each mode once, aliases left out, in the order reports list them
DISTINCT_MODES: tuple[SearchMode, ...] = tuple(m for m, s in MODES.items() if s.name is m)


# the modes in one line, for every transport's help: "hybrid: …; semantic: …"
MODES_HELP = "; ".join(
    f"{' or '.join(a.value for a, o in MODES.items() if o is s)}: {s.description}"
    for m, s in MODES.items()
    if s.name is m
)


def mode_spec(mode: SearchMode | str) -> ModeSpec:
    return MODES[SearchMode(mode)]


def modes_table() -> str:
    """The modes as docs/ranking.md shows them (`python -m pgrag.search.modes` prints it)."""
    lines = ["| mode | legs | ranked by | reranked | finds |", "|---|---|---|---|---|"]
    for m, s in MODES.items():
        if s.name is not m:
            continue
        names = " or ".join(f"`{a.value}`" for a, o in MODES.items() if o is s)
        legs = " + ".join(leg for leg, on in (("BM25", s.lexical), ("cosine", s.semantic)) if on)
        rerank = "yes" if s.rerankable else "no"
        lines.append(f"| {names} | {legs or 'pattern'} | {s.score} | {rerank} | {s.description} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(modes_table())
