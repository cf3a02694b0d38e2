"""The ranking step: the arguments the ranking SQL takes (the ranking options, the filters,
each leg's weight) and the call itself. Order comes from SQL; nothing here re-ranks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import numpy as np
import psycopg
from psycopg import sql as pgsql
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from pgrag.errors import BudgetExceeded, InvalidArgument
from pgrag.language import detect_language
from pgrag.search import sql
from pgrag.search.keywords import to_postgres_regex
from pgrag.search.models import SearchRequest
from pgrag.search.modes import ModeSpec, Ranker
from pgrag.search.options import FusionParams
from pgrag.store.rows import RankedRow

MAX_POOL = 1000

Query = str | pgsql.Composed


@dataclass(frozen=True)
class RankInput:
    """One search as the ranking SQL needs it."""

    req: SearchRequest
    spec: ModeSpec
    offset: int
    collection_ids: list[int] | None
    embedding: np.ndarray | None
    lexical_ok: bool  # the query has words the lexical leg can search
    model: str  # the provider's model: the semantic leg compares its vectors only
    regex_timeout_ms: int  # a regex ranking's statement timeout (PGRAG_REGEX_TIMEOUT_MS)


async def rank(
    conn: psycopg.AsyncConnection, f: FusionParams, q: RankInput
) -> tuple[dict[str, Any], list[RankedRow]]:
    """The arguments sent, by name (logged with the search), and the ranked rows."""
    params: dict[str, Any] = {
        "match_count": q.req.limit,
        "match_offset": q.offset,
        "collection_ids": q.collection_ids,
        "filters": pg_filters(q.req),
        "chunks_per_document": f.chunks_per_document,
    }
    return params, await RANKERS[q.spec.ranker](conn, f, q, params)


async def _rank_fused(
    conn: psycopg.AsyncConnection, f: FusionParams, q: RankInput, params: dict[str, Any]
) -> list[RankedRow]:
    params.update(_fused_args(f, q))
    chunks = sql.HYBRID_PARTS_SQL if q.req.explain else sql.HYBRID_SQL
    return await _ranked(conn, sql.DOCUMENTS_SQL if q.req.scope == "documents" else chunks, params)


async def _rank_regex(
    conn: psycopg.AsyncConnection, f: FusionParams, q: RankInput, params: dict[str, Any]
) -> list[RankedRow]:
    """A regex ranking under its own statement timeout (a pattern can backtrack for ever)."""
    params["pattern"] = to_postgres_regex(q.req.query)
    query = sql.REGEX_DOCUMENTS_SQL if q.req.scope == "documents" else sql.REGEX_SQL
    timeout_ms = q.regex_timeout_ms
    try:
        async with conn.transaction():
            await conn.execute(sql.LOCAL_STATEMENT_TIMEOUT_SQL.format(pgsql.Literal(timeout_ms)))
            return await _ranked(conn, query, params)
    except psycopg.errors.InvalidRegularExpression as exc:
        raise InvalidArgument(
            f"{exc.diag.message_primary}. Use POSIX syntax, e.g. [[:alnum:]._%+-]+@[[:alnum:].-]+"
        ) from exc
    except psycopg.errors.QueryCanceled as exc:
        raise BudgetExceeded(
            f"the regular expression took longer than {timeout_ms} ms (PGRAG_REGEX_TIMEOUT_MS): "
            "make it more specific or add filters"
        ) from exc


Rank = Callable[
    [psycopg.AsyncConnection, FusionParams, RankInput, dict[str, Any]], Awaitable[list[RankedRow]]
]
# the mode table's ranker (search/modes.py) names the SQL that orders a mode's hits
RANKERS: dict[Ranker, Rank] = {Ranker.FUSION: _rank_fused, Ranker.REGEX: _rank_regex}


def _fused_args(f: FusionParams, q: RankInput) -> dict[str, Any]:
    """Every ranking option (the request's own over the defaults), with each leg's weight
    (0 switches a leg off)."""
    spec, req = q.spec, q.req
    f = f.chosen(req)
    lexical = spec.lexical and q.lexical_ok
    # a query without searchable words: the vector leg answers (degraded keyword search)
    semantic = q.embedding is not None and (
        spec.semantic or (spec.semantic_fallback and not q.lexical_ok)
    )
    return {
        **f.arguments(),
        "query_text": req.query if lexical else None,
        "query_embedding": q.embedding if semantic else None,
        "lexical_weight": f.lexical_weight if lexical else 0.0,
        "semantic_weight": f.semantic_weight if semantic else 0.0,
        # one pool for the whole walk: a pool that grew with the offset re-ranked
        # (min-max normalisation, BM25 statistics) and the total drifted between pages
        "pool_size": min(MAX_POOL, max(f.pool_size, req.limit)),
        "min_similarity": req.threshold if semantic else None,
        "embedding_model": q.model if semantic else None,
        # the semantic leg compares each side with its language's mean vector
        "query_lang": detect_language(req.query) if semantic else None,
    }


def pg_filters(req: SearchRequest) -> dict[str, Any]:
    """The request's filters as the SQL's jsonb argument."""
    f = req.filters.model_dump(mode="json", exclude_none=True, exclude={"collection"})
    to = req.filters.date_to
    if isinstance(to, date) and not isinstance(to, datetime):
        # "modified on or before" a day includes that whole day, not only its midnight
        f["date_to"] = f"{to.isoformat()}T23:59:59.999999"
    return f


async def _ranked(
    conn: psycopg.AsyncConnection, query: Query, params: dict[str, Any]
) -> list[RankedRow]:
    """Run a ranking query; its columns are RankedRow's fields, by name."""
    async with conn.cursor(row_factory=class_row(RankedRow)) as cur:
        await cur.execute(query, {**params, "filters": Jsonb(params["filters"])})
        return await cur.fetchall()
