"""The ranking options, declared once on the Python side: one field per field of the SQL
composite `pgrag.ranking_options` (migration 0033), whose defaults are
`pgrag.ranking_defaults()` (sql/functions/05_defaults.sql, the one place they live). They
are read once per service, sent with every search as one `opts` argument built by name
(`pgrag.ranking_options(fusion => ..., ...)`, OPTIONS_SQL), shown by --explain and logged,
so that pgrag.explain_search replays a search exactly even after a default changes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row

from pgrag.search.models import SearchRequest
from pgrag.search.modes import ModeSpec

RANKING_DEFAULTS_SQL = "SELECT * FROM pgrag.ranking_defaults()"


@dataclass(frozen=True)
class FusionParams:
    """'adaptive' blends max-normalised BM25 (times a proximity term) and min-max cosine
    with a per-query lexical share min(max_lexical_share, coverage_gain x coverage); 'rrf'
    is plain RRF with rrf_k."""

    fusion: str
    rrf_k: int
    lexical_weight: float
    semantic_weight: float
    pool_size: int
    coverage_gain: float
    max_lexical_share: float
    proximity_weight: float
    proximity_width: int
    chunks_per_document: int  # scope=documents only
    bm25_k1: float
    bm25_b: float
    candidate_budget: float
    rescore_size: int

    def arguments(self) -> dict[str, Any]:
        """Every option by its field name in pgrag.ranking_options."""
        return asdict(self)

    def chosen(self, req: SearchRequest) -> FusionParams:
        """These defaults with the options the request chose instead."""
        return replace(self, **req.ranking_options())  # type: ignore[arg-type]

    def explain(self, spec: ModeSpec) -> dict[str, Any]:
        """The parameters a hit's explain shows: those its mode ranked with."""
        if spec.pattern:
            return {}
        adaptive = self.fusion == "adaptive"
        return {
            "fusion": self.fusion,
            "rrf_k": self.rrf_k if self.fusion == "rrf" else None,
            "lexical_weight": self.lexical_weight,
            "semantic_weight": self.semantic_weight,
            "coverage_gain": self.coverage_gain if adaptive else None,
            "max_lexical_share": self.max_lexical_share if adaptive else None,
            "proximity_weight": self.proximity_weight if adaptive else None,
        }


OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in fields(FusionParams))

# the `opts` argument of the ranking functions: every option bound by its name
OPTIONS_SQL = sql.SQL("pgrag.ranking_options({})").format(
    sql.SQL(", ").join(
        sql.SQL("{} => {}").format(sql.Identifier(n), sql.Placeholder(n)) for n in OPTION_NAMES
    )
)


async def load_fusion(conn: psycopg.AsyncConnection) -> FusionParams:
    """The database's ranking defaults."""
    async with conn.cursor(row_factory=class_row(FusionParams)) as cur:
        await cur.execute(RANKING_DEFAULTS_SQL)
        fusion = await cur.fetchone()
    assert fusion is not None
    return fusion
