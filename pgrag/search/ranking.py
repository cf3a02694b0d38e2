"""The ranking step: the arguments every ranker function takes (the query, the ranking
options, the filters, each leg's weight) and the call of the mode's ranker, named in the
rankers' table (search/modes.py). Order comes from SQL; nothing here re-ranks, and nothing
here knows one ranker from another."""

from __future__ import annotations

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
from pgrag.search.modes import ModeSpec
from pgrag.search.options import FusionParams
from pgrag.store.rows import RankedRow

MAX_POOL = 1000


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
    regex_timeout_ms: int  # a pattern ranking's statement timeout (PGRAG_REGEX_TIMEOUT_MS)


async def rank(
    conn: psycopg.AsyncConnection, f: FusionParams, q: RankInput
) -> tuple[dict[str, Any], list[RankedRow]]:
    """The arguments sent, by name (logged with the search), and the ranked rows."""
    params = _arguments(f, q)
    query = sql.ranking_sql(q.spec.ranker.function)
    if not q.spec.ranker.pattern:
        return params, await _ranked(conn, query, params)
    return params, await _bounded(conn, query, params, q.regex_timeout_ms)


async def _bounded(
    conn: psycopg.AsyncConnection, query: pgsql.Composed, params: dict[str, Any], ms: int
) -> list[RankedRow]:
    """A pattern ranking under its own statement timeout (a pattern can backtrack for
    ever), its pattern's errors said as such."""
    try:
        async with conn.transaction():
            await conn.execute(sql.LOCAL_STATEMENT_TIMEOUT_SQL.format(pgsql.Literal(ms)))
            return await _ranked(conn, query, params)
    except psycopg.errors.InvalidRegularExpression as exc:
        raise InvalidArgument(
            f"{exc.diag.message_primary}. Use POSIX syntax, e.g. [[:alnum:]._%+-]+@[[:alnum:].-]+"
        ) from exc
    except psycopg.errors.QueryCanceled as exc:
        raise BudgetExceeded(
            f"the regular expression took longer than {ms} ms (PGRAG_REGEX_TIMEOUT_MS): "
            "make it more specific or add filters"
        ) from exc


def _arguments(f: FusionParams, q: RankInput) -> dict[str, Any]:
    """Every argument of a ranker function: the page, the filters, every ranking option
    (the request's own over the defaults) with each leg's weight (0 switches a leg off)."""
    spec, req = q.spec, q.req
    f = f.chosen(req)
    lexical = spec.lexical and q.lexical_ok
    # a query without searchable words: the vector leg answers (degraded keyword search)
    semantic = q.embedding is not None and (
        spec.semantic or (spec.semantic_fallback and not q.lexical_ok)
    )
    if spec.ranker.pattern:
        text: str | None = to_postgres_regex(req.query)
    else:
        text = req.query if lexical else None
    return {
        **f.arguments(),
        "match_count": req.limit,
        "match_offset": q.offset,
        "scope": req.scope,
        "collection_ids": q.collection_ids,
        "filters": pg_filters(req),
        "with_parts": req.explain,
        "query_text": text,
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
    conn: psycopg.AsyncConnection, query: pgsql.Composed, params: dict[str, Any]
) -> list[RankedRow]:
    """Run a ranking query; its columns are RankedRow's fields, by name."""
    async with conn.cursor(row_factory=class_row(RankedRow)) as cur:
        await cur.execute(query, {**params, "filters": Jsonb(params["filters"])})
        return await cur.fetchall()
