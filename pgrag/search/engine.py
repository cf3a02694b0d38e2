"""The search service: embeds the query, ranks in SQL (ranking.py), shapes hits with
snippets, cuts the page to the token budget and logs the search. Order comes from SQL;
only the optional rerank stage (rerank.py), a model's judgement, reorders its first ranks."""

from __future__ import annotations

import logging
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from pgrag import deadline
from pgrag.db.one import scalar
from pgrag.db.scope import scoped_connection
from pgrag.embeddings.base import EmbeddingProvider
from pgrag.errors import ErrorCode, InvalidArgument, NotFound, PgragError, UpstreamError
from pgrag.language import detect_language
from pgrag.metrics import observe_search
from pgrag.paging import (
    Budgeted,
    ContinuationCodec,
    fingerprint,
    fit_to_budget,
    item_tokens,
    page_budget,
)
from pgrag.search import sql
from pgrag.search.hits import CONTEXT_CHARS, HitSource, build_hit
from pgrag.search.keywords import KeywordMatcher, Matcher, RegexMatcher, extract_keywords
from pgrag.search.models import ContentMode, Explain, SearchData, SearchHit, SearchRequest
from pgrag.search.modes import ModeSpec
from pgrag.search.options import FusionParams, load_fusion
from pgrag.search.parts import logged_parts
from pgrag.search.ranking import RankInput, rank
from pgrag.search.rerank import Reranker, RerankReport, note_rerank
from pgrag.settings import REGEX_TIMEOUT_MS, Settings
from pgrag.store.pages import extracted_text
from pgrag.store.rows import ChunkDetail, RankedRow
from pgrag.tokens import cut_to_tokens

log = logging.getLogger(__name__)
Conn = psycopg.AsyncConnection[Any]

MAX_LEXICAL_WORDS = 100  # longer queries skip the lexical leg (fail soft: semantic only)
HIT_RESERVE = 300  # tokens of a hit besides its full text (ids, location, metadata)
# explain for a chunk the semantic leg cannot see: two-phase ingestion writes its document's
# chunks first, their vectors after
NO_VECTOR = "no vector yet: the semantic leg could not rank this chunk"


@dataclass(frozen=True)
class _Page:
    """What the database gave for a page of hits, to be shaped off the event loop."""

    req: SearchRequest
    spec: ModeSpec
    rows: list[RankedRow]
    details: dict[int, ChunkDetail]
    content_mode: ContentMode
    full_texts: dict[str, str]  # content_mode=full: document id -> its extracted text
    reranked: RerankReport | None


@dataclass
class SearchPage:
    data: SearchData
    has_more: bool
    next_token: str | None
    first_exceeded: bool


class SearchService:
    def __init__(
        self,
        pool: AsyncConnectionPool,
        provider: EmbeddingProvider,
        *,
        max_snippets: int = 10,
        snippet_summary: bool = True,
        default_content_mode: ContentMode = "smart_extract",
        log_searches: bool = True,
        reranker: Reranker | None = None,
        regex_timeout_ms: int = REGEX_TIMEOUT_MS,
    ) -> None:
        self.pool = pool
        self.provider = provider
        self.max_snippets = max_snippets
        self.snippet_summary = snippet_summary
        self.default_content_mode = default_content_mode
        self._fusion: FusionParams | None = None
        self.log_searches = log_searches
        self._codec: ContinuationCodec | None = None
        self.reranker = reranker
        self.regex_timeout_ms = regex_timeout_ms

    @classmethod
    def configured(
        cls, pool: AsyncConnectionPool, provider: EmbeddingProvider, settings: Settings
    ) -> SearchService:
        """The service with the operator's snippet and content settings (CLI and servers)."""
        return cls(
            pool,
            provider,
            max_snippets=settings.search_max_snippets,
            snippet_summary=settings.return_snippet_summary,
            default_content_mode=settings.default_content_mode,
            reranker=Reranker.of(settings),
            regex_timeout_ms=settings.regex_timeout_ms,
        )

    @property
    def fusion(self) -> FusionParams:
        """The ranking defaults; read from the database by the first search."""
        if self._fusion is None:
            raise RuntimeError("no search has run yet: the fusion defaults are not loaded")
        return self._fusion

    async def fusion_params(self, conn: psycopg.AsyncConnection) -> FusionParams:
        if self._fusion is None:
            self._fusion = await load_fusion(conn)
        return self._fusion

    async def codec(self, conn: psycopg.AsyncConnection) -> ContinuationCodec:
        """The continuation-token codec, keyed by the database's secret (read once)."""
        if self._codec is None:
            row = await (await conn.execute(sql.SECRET_SQL)).fetchone()
            if row is None:  # migration 0003 stores it: never absent on a migrated database
                raise RuntimeError("pgrag's continuation secret is missing: run `pgrag db migrate`")
            self._codec = ContinuationCodec(row[0].encode())
        return self._codec

    @observe_search
    async def search(
        self,
        req: SearchRequest,
        *,
        collection_scope: list[str] | None = None,
        caller: str | None = None,
    ) -> SearchPage:
        started = time.perf_counter()
        timings: dict[str, float] = {}
        spec = req.spec
        scope_fp = fingerprint({"req": req.page_fingerprint_args(), "scope": collection_scope})
        embedding: np.ndarray | None = None
        upstream: UpstreamError | None = None
        if spec.semantic:
            # before taking a pooled connection: the model may queue, the pool should not
            embedding, upstream = await self._embed(req.query, timings)
        async with AsyncExitStack() as stack:
            conn = await stack.enter_async_context(scoped_connection(self.pool, collection_scope))
            offset = 0
            if req.continuation_token:
                state = (await self.codec(conn)).decode(req.continuation_token, "search", scope_fp)
                offset = int(state.get("o", 0))
            collection_ids = await self._collection_ids(conn, req, collection_scope)
            degraded: list[str] = []
            lexical_ok = spec.lexical and await self._lexical_usable(conn, req.query)
            if spec.lexical and not lexical_ok:
                degraded.append("lexical")
            if spec.semantic_fallback and not lexical_ok:  # rare: no searchable words at all
                embedding, upstream = await self._embed(req.query, timings)
            if upstream is not None:
                if not lexical_ok:
                    raise upstream
                degraded.append("semantic")
            if not lexical_ok and embedding is None and not spec.pattern:
                raise InvalidArgument(
                    "the query has no searchable words (only stop words or symbols) and no "
                    "embedding: add meaningful words, or use mode='regex' for patterns"
                )
            t = time.perf_counter()
            model, regex_ms = self.provider.model, self.regex_timeout_ms
            q = RankInput(req, spec, offset, collection_ids, embedding, lexical_ok, model, regex_ms)
            conn, params, rows, reranked = await self._ranked(stack, conn, q, collection_scope)
            timings["sql_ms"] = round((time.perf_counter() - t) * 1000, 2)
            note_rerank(reranked, timings, degraded)
            hits, budget, bounded = await self._hits(conn, req, rows, collection_ids, reranked)
            if bounded:
                degraded.append("snippets")
            total = rows[0].total if rows else 0
            # ranks are positions in the whole ranking: a row deleted since ranking is skipped
            next_offset = hits[-1].rank if hits else offset + len(rows)
            has_more = next_offset < total
            token = (
                (await self.codec(conn)).encode("search", scope_fp, {"o": next_offset})
                if has_more
                else None
            )
            timings["total_ms"] = round((time.perf_counter() - started) * 1000, 2)
        # the log is an operator table: written outside the caller's scoped transaction
        async with self.pool.connection() as conn:
            parts = logged_parts(rows, hits)
            search_id = await self._log(
                conn, req, params, embedding, degraded, hits, timings, caller, reranked, parts
            )
        data = SearchData(
            results=hits,
            total_matches=total,
            mode=spec.name,
            scope=req.scope,
            degraded=degraded,
            model=self.provider.model if embedding is not None else None,
            took_ms=timings["total_ms"],
            search_id=search_id,
            token_count=budget.tokens,
        )
        return SearchPage(data, has_more, token, budget.first_exceeded)

    async def _ranked(
        self, stack: AsyncExitStack, conn: Conn, q: RankInput, scope: list[str] | None
    ) -> tuple[Conn, dict[str, Any], list[RankedRow], RerankReport | None]:
        """The ranked page. A rerank model's call holds no pooled connection: the scoped
        transaction ends before it, and a new one reads the page."""
        fusion = await self.fusion_params(conn)
        if self.reranker is None or not self.reranker.applies(q):
            return conn, *(await rank(conn, fusion, q)), None
        params, rows, texts = await self.reranker.candidates(conn, fusion, q)
        await stack.aclose()
        rows, reranked = await self.reranker.reorder(q.req.query, rows, texts)
        conn = await stack.enter_async_context(scoped_connection(self.pool, scope))
        return conn, params, await self.reranker.page(conn, fusion, q, rows), reranked

    async def _embed(
        self, query: str, timings: dict[str, float]
    ) -> tuple[np.ndarray | None, UpstreamError | None]:
        """The query vector, or the provider's error for the caller to degrade on."""
        t = time.perf_counter()
        try:
            return await self.provider.embed_query(query), None
        except UpstreamError as exc:
            return None, exc
        finally:
            timings["embed_ms"] = round((time.perf_counter() - t) * 1000, 2)

    async def _collection_ids(
        self, conn: psycopg.AsyncConnection, req: SearchRequest, scope: list[str] | None
    ) -> list[int] | None:
        names = [req.filters.collection] if req.filters.collection else scope
        if names is None:
            return None
        if scope is not None and req.filters.collection and req.filters.collection not in scope:
            raise PgragError(
                f"collection '{req.filters.collection}' is outside this key's scope",
                code=ErrorCode.FORBIDDEN,
            )
        ids = []
        for name in names:
            row = await (await conn.execute(sql.COLLECTION_IDS_SQL, (name,))).fetchone()
            if row is None and req.filters.collection:
                raise NotFound(
                    f"no collection named '{name}': list them with list_folders or omit the filter"
                )
            if row is not None:
                ids.append(row[0])
        return ids

    async def _lexical_usable(self, conn: psycopg.AsyncConnection, query: str) -> bool:
        if len(query.split()) > MAX_LEXICAL_WORDS:
            return False
        try:  # a query the database cannot parse answers 0 there, without aborting the request
            nodes = await scalar(conn, sql.LEXICAL_NODES_SQL, (query,))
        except psycopg.DataError:  # refused before it was sent (a NUL character)
            return False
        return bool(nodes)

    async def _hits(
        self,
        conn: psycopg.AsyncConnection,
        req: SearchRequest,
        rows: list[RankedRow],
        collection_ids: list[int] | None,
        reranked: RerankReport | None,
    ) -> tuple[list[SearchHit], Budgeted, bool]:
        """The page's hits, cut to the token budget, and whether highlighting stopped early.
        The database is read here; the hits are shaped off the event loop."""
        if not rows:
            return [], Budgeted(0, 0, False), False
        chunk_ids: set[int] = set()
        for r in rows:
            chunk_ids.update(r.chunk_ids or [r.chunk_id])
        margin = max(CONTEXT_CHARS, round(req.context_chars * 1.25)) + 150
        async with conn.cursor(row_factory=class_row(ChunkDetail)) as cur:
            await cur.execute(
                sql.CHUNK_DETAILS_SQL if collection_ids is None else sql.CHUNK_DETAILS_IN_SQL,
                {"ids": list(chunk_ids), "margin": margin, "collection_ids": collection_ids},
            )
            details = {d.id: d for d in await cur.fetchall()}
        content_mode = req.content_mode or self.default_content_mode
        full_texts: dict[str, str] = {}
        if content_mode == "full":
            # each document read on its collection's shard (Citus), not on every shard
            docs = {
                details[r.chunk_id].document_id: details[r.chunk_id].collection_id
                for r in rows
                if r.chunk_id in details
            }
            for doc_id, collection_id in docs.items():
                full_texts[doc_id] = await extracted_text(conn, doc_id, collection_id)
        page = _Page(req, req.spec, rows, details, content_mode, full_texts, reranked)
        return await deadline.off_loop(self._shape, page)

    def _shape(self, page: _Page) -> tuple[list[SearchHit], Budgeted, bool]:
        """Snippets, full texts and token counts: CPU work, bounded by the call's deadline."""
        req, spec = page.req, page.spec
        matcher: Matcher = (
            RegexMatcher(req.query) if spec.pattern else KeywordMatcher(extract_keywords(req.query))
        )
        query_lang = None if spec.pattern else detect_language(req.query)
        budget = page_budget(req.max_tokens)
        cut = max(50, budget - HIT_RESERVE)
        full_texts = {doc: cut_to_tokens(text, cut) for doc, text in page.full_texts.items()}
        hits = []
        for r in page.rows:
            deadline.check()
            d = page.details.get(r.chunk_id)
            if d is None:  # deleted between ranking and fetching
                continue
            hit_chunks = [
                page.details[i] for i in (r.chunk_ids or [r.chunk_id]) if i in page.details
            ]
            hits.append(
                build_hit(
                    HitSource(req, spec, r.rank, d, hit_chunks, matcher, page.content_mode),
                    full_texts.get(d.document_id),
                    Explain(
                        lexical_rank=r.lexical_rank,
                        lexical_score=r.lexical_score,
                        semantic_rank=r.semantic_rank,
                        semantic_score=r.semantic_score,
                        fused_score=r.fused_score,
                        regex_matches=r.regex_matches,
                        query_lang=query_lang,
                        chunk_lang=d.lang,
                        semantic_note=None if d.has_vector else NO_VECTOR,
                        document_context=d.context,
                        **self.fusion.chosen(req).explain(spec),
                        **(page.reranked.explain(r.chunk_id, r.rank) if page.reranked else {}),
                    ),
                    max_snippets=self.max_snippets,
                    snippet_summary=self.snippet_summary,
                )
            )
        fit = fit_to_budget(hits, budget, lambda h: item_tokens(h.model_dump(mode="json")))
        return hits[: fit.count], fit, matcher.exhausted

    async def _log(
        self,
        conn: psycopg.AsyncConnection,
        req: SearchRequest,
        params: dict[str, Any],
        embedding: np.ndarray | None,
        degraded: list[str],
        hits: list[SearchHit],
        timings: dict[str, float],
        caller: str | None,
        reranked: RerankReport | None,
        parts: list[dict[str, Any]] | None,
    ) -> int | None:
        if not self.log_searches:
            return None
        logged = {k: v for k, v in params.items() if k != "query_embedding"}  # its own column
        results = [
            {"rank": h.rank, "chunk_id": h.chunk_id, "document_id": h.document_id, "score": h.score}
            for h in hits
        ]
        try:  # one autocommit INSERT on its own connection: no transaction round trips
            logged_id = await scalar(
                conn,
                sql.LOG_SQL,
                (
                    req.query,
                    req.spec.name.value,
                    req.scope,
                    Jsonb(logged),
                    embedding,
                    self.provider.model,
                    degraded,
                    Jsonb(results),
                    Jsonb(timings),
                    caller,
                    *(reranked.log_columns() if reranked else (None, None, None, None)),
                    None if parts is None else Jsonb(parts),
                ),
            )
            return int(logged_id)
        except psycopg.Error:  # logging must never fail a search
            log.warning("could not log search", exc_info=True)
            return None
