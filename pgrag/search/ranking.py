"""The ranking step: the parameters the ranking SQL takes (the fusion defaults, the filters,
each leg's weight) and the call itself. Order comes from SQL; nothing here re-ranks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import args_row, class_row
from psycopg.types.json import Jsonb

from pgrag.errors import ErrorCode, InvalidArgument, PgragError
from pgrag.language import detect_language
from pgrag.search import sql
from pgrag.search.keywords import to_postgres_regex
from pgrag.search.models import SearchRequest
from pgrag.store.rows import RankedRow

REGEX_TIMEOUT_MS = 3000
MAX_POOL = 1000


@dataclass(frozen=True)
class FusionParams:
    """What the ranking SQL ranks with: `pgrag.fusion_defaults()` (sql/functions/05_defaults.sql,
    the one place the defaults live), read once per service. Sent with every search, shown by
    --explain and logged, so that pgrag.explain_search replays a search exactly even after
    the defaults change. 'adaptive' blends max-normalised BM25 (times a proximity term) and
    min-max cosine with a per-query lexical share min(max_lexical_share, coverage_gain x
    coverage); 'rrf' is plain RRF with rrf_k."""

    fusion: str
    rrf_k: int
    lexical_weight: float
    semantic_weight: float
    pool_size: int
    coverage_gain: float
    max_lexical_share: float
    proximity_weight: float
    proximity_width: int
    chunks_per_document: int
    bm25_k1: float
    bm25_b: float
    candidate_budget: float
    rescore_size: int

    def explain(self, mode: str) -> dict[str, Any]:
        """The parameters a hit's explain shows: those its mode ranked with."""
        if mode == "regex":
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


async def load_fusion(conn: psycopg.AsyncConnection) -> FusionParams:
    """The database's ranking defaults."""
    async with conn.cursor(row_factory=class_row(FusionParams)) as cur:
        await cur.execute(sql.FUSION_DEFAULTS_SQL)
        fusion = await cur.fetchone()
    assert fusion is not None
    return fusion


@dataclass(frozen=True)
class RankInput:
    """One search as the ranking SQL needs it."""

    req: SearchRequest
    mode: str
    offset: int
    collection_ids: list[int] | None
    embedding: np.ndarray | None
    lexical_ok: bool  # the query has words the lexical leg can search
    model: str  # the provider's model: the semantic leg compares its vectors only


async def rank(
    conn: psycopg.AsyncConnection, f: FusionParams, q: RankInput
) -> tuple[dict[str, Any], list[RankedRow]]:
    """The parameters sent (logged with the search) and the ranked rows."""
    params: dict[str, Any] = {
        "match_count": q.req.limit,
        "match_offset": q.offset,
        "collection_ids": q.collection_ids,
        "filters": pg_filters(q.req),
        "chunks_per_document": f.chunks_per_document,
    }
    if q.mode == "regex":
        params["pattern"] = to_postgres_regex(q.req.query)
        documents = q.req.scope == "documents"
        return params, await _rank_regex(
            conn, sql.REGEX_DOCUMENTS_SQL if documents else sql.REGEX_SQL, params
        )
    params.update(_hybrid_params(f, q))
    if q.req.scope == "documents":
        query = sql.DOCUMENTS_SQL
    else:
        query = sql.HYBRID_PARTS_SQL if q.req.explain else sql.HYBRID_SQL
    return params, await _ranked(conn, query, params)


def _hybrid_params(f: FusionParams, q: RankInput) -> dict[str, Any]:
    """Each leg's weight (0 switches a leg off) and the fusion parameters."""
    mode, req = q.mode, q.req
    lexical_weight = f.lexical_weight if q.lexical_ok and mode in ("hybrid", "keyword") else 0.0
    semantic_weight = f.semantic_weight if q.embedding is not None and mode != "keyword" else 0.0
    if mode == "keyword" and not q.lexical_ok:
        semantic_weight = f.semantic_weight  # degraded: the other leg answers
    return {
        "query": req.query if lexical_weight else None,
        "embedding": q.embedding if semantic_weight else None,
        "fusion": f.fusion,
        "rrf_k": f.rrf_k,
        "coverage_gain": f.coverage_gain,
        "max_lexical_share": f.max_lexical_share,
        "proximity_weight": f.proximity_weight,
        "bm25_k1": f.bm25_k1,
        "bm25_b": f.bm25_b,
        "candidate_budget": f.candidate_budget,
        "rescore_size": f.rescore_size,
        "lexical_weight": lexical_weight,
        "semantic_weight": semantic_weight,
        # one pool for the whole walk: a pool that grew with the offset re-ranked
        # (min-max normalisation, BM25 statistics) and the total drifted between pages
        "pool_size": min(MAX_POOL, max(f.pool_size, req.limit)),
        "min_similarity": req.threshold if semantic_weight else None,
        "embedding_model": q.model if semantic_weight else None,
        # the semantic leg compares each side with its language's mean vector
        "query_lang": detect_language(req.query) if semantic_weight else None,
    }


async def _rank_regex(
    conn: psycopg.AsyncConnection, query: str, params: dict[str, Any]
) -> list[RankedRow]:
    """A regex ranking under its own statement timeout (a pattern can backtrack for ever)."""
    try:
        async with conn.transaction():
            await conn.execute(f"SET LOCAL statement_timeout = {REGEX_TIMEOUT_MS}")
            return await _ranked(conn, query, params)
    except psycopg.errors.InvalidRegularExpression as exc:
        raise InvalidArgument(
            f"{exc.diag.message_primary}. Use POSIX syntax, e.g. [[:alnum:]._%+-]+@[[:alnum:].-]+"
        ) from exc
    except psycopg.errors.QueryCanceled as exc:
        raise PgragError(
            "the regular expression took too long: make it more specific or add filters",
            code=ErrorCode.TIMEOUT,
        ) from exc


def pg_filters(req: SearchRequest) -> dict[str, Any]:
    """The request's filters as the SQL's jsonb argument."""
    f = req.filters.model_dump(mode="json", exclude_none=True, exclude={"collection"})
    to = req.filters.date_to
    if isinstance(to, date) and not isinstance(to, datetime):
        # "modified on or before" a day includes that whole day, not only its midnight
        f["date_to"] = f"{to.isoformat()}T23:59:59.999999"
    return f


async def _ranked(
    conn: psycopg.AsyncConnection, query: str, params: dict[str, Any]
) -> list[RankedRow]:
    """Run a ranking query; its rows are read by position (see RankedRow)."""
    async with conn.cursor(row_factory=args_row(RankedRow)) as cur:
        await cur.execute(query, {**params, "filters": Jsonb(params["filters"])})
        return await cur.fetchall()
