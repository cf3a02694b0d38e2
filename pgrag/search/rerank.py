"""The optional rerank stage: the first fused candidates go to a rerank model (any litellm
rerank provider, or a self-hosted Cohere/Jina-style server through its api_base) and come
back in its order. Anything short of one valid score for every candidate sent leaves the
whole fused order standing (degraded 'rerank'): a partial answer must never push the
candidates it did not score to the bottom."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from pgrag.config.rerank import RerankSettings
from pgrag.embeddings.remote import import_litellm
from pgrag.metrics import observe_rerank
from pgrag.search import sql
from pgrag.search.options import FusionParams
from pgrag.search.ranking import RankInput, rank
from pgrag.store.rows import RankedRow
from pgrag.tokens import encoding

log = logging.getLogger(__name__)

MIN_CANDIDATE_TOKENS = 16  # a candidate cut shorter than this by the total bound is not sent
# answers kept by digest: the later pages of a walk among the candidates ask the model
# nothing, and see the order the first page saw
KEPT_ANSWERS = 512


class RerankOutcome(StrEnum):
    OK = "ok"
    TIMEOUT = "timeout"
    ERROR = "error"  # the provider failed or its answer could not be read
    MALFORMED = "malformed"  # read, but not one score per candidate index
    PARTIAL = "partial"  # scores for some candidates only


@dataclass(frozen=True)
class RerankConfig:
    model: str
    api_base: str | None
    api_key: str | None
    top_n: int
    max_tokens: int  # per candidate
    max_total_tokens: int  # per search
    timeout_s: float

    @classmethod
    def of(cls, settings: RerankSettings) -> RerankConfig | None:
        """The operator's rerank settings, or None when no rerank model is set."""
        if not settings.rerank_model:
            return None
        return cls(
            settings.rerank_model,
            settings.rerank_api_base,
            settings.rerank_api_key,
            settings.rerank_top_n,
            settings.rerank_max_tokens,
            settings.rerank_max_total_tokens,
            settings.rerank_timeout_s,
        )


@dataclass(frozen=True)
class Figures:
    """One reranked candidate."""

    chunk_id: int
    fused_rank: int
    rerank_rank: int
    rerank_score: float


@dataclass
class RerankReport:
    """What the rerank stage did for one search: shown by explain, logged, counted."""

    model: str
    outcome: RerankOutcome
    figures: dict[int, Figures] = field(default_factory=dict)  # by chunk id, when ok
    cost: float | None = None
    ms: float = 0.0

    @property
    def degraded(self) -> bool:
        return self.outcome is not RerankOutcome.OK

    def explain(self, chunk_id: int, rank: int) -> dict[str, Any]:
        """A hit's explain fields: its figures, or only its fused rank (past the candidates)."""
        if self.degraded:
            return {}
        f = self.figures.get(chunk_id)
        if f is None:
            return {"fused_rank": rank}
        return {
            "fused_rank": f.fused_rank,
            "rerank_rank": f.rerank_rank,
            "rerank_score": f.rerank_score,
        }

    def log_columns(self) -> tuple[str, str, Jsonb | None, float | None]:
        figures = [vars(f) for f in sorted(self.figures.values(), key=lambda f: f.rerank_rank)]
        return self.model, str(self.outcome), Jsonb(figures) if figures else None, self.cost


class _Refused(Exception):
    def __init__(self, outcome: RerankOutcome, reason: str) -> None:
        super().__init__(reason)
        self.outcome = outcome


def scores_of(results: Any, n: int) -> list[float]:
    """One finite score per candidate index 0..n-1, or _Refused saying what is wrong."""
    if not isinstance(results, list):
        raise _Refused(RerankOutcome.MALFORMED, "the answer holds no list of results")
    scores: list[float | None] = [None] * n
    for r in results:
        index = r.get("index") if isinstance(r, dict) else None
        score = r.get("relevance_score") if isinstance(r, dict) else None
        if (
            not isinstance(index, int)
            or isinstance(index, bool)
            or not 0 <= index < n
            or scores[index] is not None
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            raise _Refused(RerankOutcome.MALFORMED, f"result {r!r:.120} is no new index and score")
        scores[index] = float(score)
    if any(s is None for s in scores):
        missing = sum(s is None for s in scores)
        raise _Refused(RerankOutcome.PARTIAL, f"no score for {missing} of {n} candidates")
    return [s for s in scores if s is not None]


def reordered(rows: list[RankedRow], scores: list[float]) -> tuple[list[RankedRow], list[Figures]]:
    """The first len(scores) rows by score (ties keep the fused order), then the rest as
    they were; each row's rank is its new position."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    moved = [rows[i] for i in order] + rows[len(scores) :]
    figures = [
        Figures(rows[i].chunk_id, rows[i].rank, pos, round(scores[i], 6))
        for pos, i in enumerate(order, 1)
    ]
    return [replace(r, rank=pos) for pos, r in enumerate(moved, 1)], figures


def candidate_texts(
    rows: list[RankedRow], contents: dict[int, str], max_tokens: int, max_total: int
) -> list[str]:
    """The texts sent, in fused order, each cut to `max_tokens`, until `max_total` tokens."""
    enc = encoding()
    texts: list[str] = []
    left = max_total
    for r in rows:
        text = "\n".join(contents.get(i, "") for i in (r.chunk_ids or [r.chunk_id]))
        tokens = enc.encode_ordinary(text)[: min(max_tokens, left)]
        if len(tokens) < min(MIN_CANDIDATE_TOKENS, len(text)) or not tokens:
            break
        texts.append(enc.decode(tokens))
        left -= len(tokens)
    return texts


class Reranker:
    def __init__(self, config: RerankConfig) -> None:
        self.config = config
        self._answers: OrderedDict[str, list[float]] = OrderedDict()

    @classmethod
    def of(cls, settings: RerankSettings) -> Reranker | None:
        config = RerankConfig.of(settings)
        return cls(config) if config else None

    async def load(self) -> None:
        """litellm takes seconds to import: off the event loop (servers: before serving)."""
        await asyncio.to_thread(import_litellm)

    def applies(self, q: RankInput) -> bool:
        """Asked for, a mode ranked by relevance, and a page that starts among the candidates."""
        return q.req.rerank and q.spec.rerankable and q.offset < self.config.top_n

    async def candidates(
        self, conn: psycopg.AsyncConnection, fusion: FusionParams, q: RankInput
    ) -> tuple[dict[str, Any], list[RankedRow], list[str]]:
        """The top N fused rows and the texts the model is sent, read before the call so
        the model's seconds hold no pooled connection."""
        top = replace(q, req=q.req.model_copy(update={"limit": self.config.top_n}), offset=0)
        params, rows = await rank(conn, fusion, top)
        params = {**params, "match_count": q.req.limit, "match_offset": q.offset}  # the page's
        contents = await _contents(conn, rows, q.collection_ids)
        cfg = self.config
        return params, rows, candidate_texts(rows, contents, cfg.max_tokens, cfg.max_total_tokens)

    async def reorder(
        self, query: str, rows: list[RankedRow], texts: list[str]
    ) -> tuple[list[RankedRow], RerankReport | None]:
        """The candidates in the model's order, or in the fused one when it fails."""
        if len(texts) < 2:
            return rows, None
        report, scores = await self._rerank(query, texts)
        if scores is not None:
            rows, figures = reordered(rows, scores)
            report.figures = {f.chunk_id: f for f in figures}
        return rows, report

    async def page(
        self,
        conn: psycopg.AsyncConnection,
        fusion: FusionParams,
        q: RankInput,
        rows: list[RankedRow],
    ) -> list[RankedRow]:
        """The page cut from the reranked candidates, and the fused rows past them when
        the page runs on."""
        top_n, limit = self.config.top_n, q.req.limit
        page = rows[q.offset : q.offset + limit]
        missing = q.offset + limit - len(rows)
        if missing > 0 and len(rows) == top_n:
            tail = replace(q, req=q.req.model_copy(update={"limit": missing}), offset=top_n)
            page += (await rank(conn, fusion, tail))[1]
        return page

    async def _rerank(
        self, query: str, texts: list[str]
    ) -> tuple[RerankReport, list[float] | None]:
        """The model's score of each text, or None and the report saying why not."""
        key = hashlib.sha256(json.dumps([query, texts]).encode()).hexdigest()
        if (kept := self._answers.get(key)) is not None:
            self._answers.move_to_end(key)
            return RerankReport(self.config.model, RerankOutcome.OK, cost=0.0), kept
        started = time.perf_counter()
        report = RerankReport(self.config.model, RerankOutcome.OK)
        scores = None
        try:
            results, report.cost = await self._call(query, texts)
            scores = scores_of(results, len(texts))
            self._answers[key] = scores
            if len(self._answers) > KEPT_ANSWERS:
                self._answers.popitem(last=False)
        except Exception as exc:  # the provider's failure is the stage's, never the search's
            report.outcome, why = _failure(exc, self.config.timeout_s)
            log.warning(
                "rerank %s %s: %s; the fused order stands", report.model, report.outcome, why
            )
        report.ms = round((time.perf_counter() - started) * 1000, 2)
        observe_rerank(str(report.outcome), report.cost)
        return report, scores

    async def _call(self, query: str, texts: list[str]) -> tuple[Any, float | None]:
        await self.load()
        litellm = import_litellm()
        kwargs: dict[str, Any] = {
            "model": self.config.model,
            "query": query,
            "documents": texts,
            "top_n": len(texts),
            "timeout": self.config.timeout_s,
            "max_retries": 0,  # a retry would outlast the search: the fused order is the retry
            "num_retries": 0,
        }
        if self.config.api_base:
            kwargs["api_base"] = self.config.api_base
        if self.config.api_key:
            kwargs["api_key"] = self.config.api_key
        async with asyncio.timeout(self.config.timeout_s):
            response = await litellm.arerank(**kwargs)
        try:  # a self-hosted model has no price: no cost, not a failed rerank
            cost = litellm.completion_cost(
                completion_response=response, model=self.config.model, call_type="arerank"
            )
        except Exception:
            cost = None
        return response.results, float(cost) if isinstance(cost, int | float) else None


def _failure(exc: Exception, timeout_s: float) -> tuple[RerankOutcome, str]:
    """The outcome of a failed call, and one line saying why (never a traceback)."""
    if isinstance(exc, _Refused):
        return exc.outcome, str(exc)
    if isinstance(exc, TimeoutError | import_litellm().exceptions.Timeout):
        return RerankOutcome.TIMEOUT, f"no answer within {timeout_s}s"
    first = str(exc).splitlines()[0][:300] if str(exc) else ""
    return RerankOutcome.ERROR, f"{type(exc).__name__}: {first}"


async def _contents(
    conn: psycopg.AsyncConnection, rows: list[RankedRow], collection_ids: list[int] | None
) -> dict[int, str]:
    ids = sorted({i for r in rows for i in (r.chunk_ids or [r.chunk_id])})
    query = sql.RERANK_TEXTS_SQL if collection_ids is None else sql.RERANK_TEXTS_IN_SQL
    cur = await conn.execute(query, {"ids": ids, "collection_ids": collection_ids})
    return {int(i): str(c) for i, c in await cur.fetchall()}


def note_rerank(
    report: RerankReport | None, timings: dict[str, float], degraded: list[str]
) -> None:
    """The stage's time, apart from the SQL's it ran between, and whether it failed."""
    if report is not None:
        timings["rerank_ms"] = report.ms
        timings["sql_ms"] = round(timings["sql_ms"] - report.ms, 2)
        degraded += ["rerank"] if report.degraded else []
