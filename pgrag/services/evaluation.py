"""`pgrag eval`: a user's own queries with expected documents, run through the search
service, scored as hit@1, hit@3, MRR, location accuracy and answer-in-snippet.

Written once and shared by the CLI command and `benchmarks/quality/documents.py`, so the figures a
user gets for their collection are computed exactly like the published benchmark's.

A query file is JSON Lines, one object per line (blank lines and lines starting with `#`
are skipped):

    {"query": "hotel cap in Shanghai", "document": "policies/travel.pdf",
     "location": {"page": 3}, "answer": "950 CNY", "category": "direct"}

`document` is a document id, its path as stored, or its file name. `location` uses the
fields of a search result's `location` (page, section, sheet, slide, rows as "12" or
"12-15"); every field given must match. `mode` runs that line in that mode only (regex
patterns need it); other lines run in each mode asked for (hybrid by default). `options`
sets ranking options of the search for that line (`{"fusion": "rrf", "rrf_k": 10}`: fusion,
lexical_weight, semantic_weight, rrf_k, threshold, rerank), checked as the search checks them.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pgrag.search.engine import SearchService
from pgrag.search.models import (
    RANKING_OPTIONS,
    Location,
    SearchFilters,
    SearchHit,
    SearchRequest,
)
from pgrag.search.modes import DISTINCT_MODES, SearchMode, mode_spec
from pgrag.services.eval_metrics import METRICS as METRICS
from pgrag.services.eval_metrics import Outcome as Outcome
from pgrag.services.eval_metrics import metrics as metrics
from pgrag.services.eval_metrics import report as report
from pgrag.services.eval_metrics import summarise as summarise
from pgrag.store import catalog

EVAL_MODES = DISTINCT_MODES
# what a case may set of the search (search/models.py): the ranking knobs, threshold, rerank
CASE_OPTIONS = (*RANKING_OPTIONS, "threshold", "rerank")
DEPTH = 10  # results fetched per query: MRR is MRR@10
_ROWS = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


class QueryFileError(ValueError):
    """A malformed query file; the message names the line and the problem."""


class ExpectedLocation(BaseModel):
    """Where the answer is, in the notation of search results' `location`."""

    model_config = ConfigDict(extra="forbid")

    page: int | None = Field(None, ge=1)
    section: str | None = None
    sheet: str | None = None
    slide: int | None = Field(None, ge=1)
    rows: str | None = Field(None, description='sheet/CSV rows: "12" or "12-15" (header = 1)')

    @field_validator("rows", mode="before")
    @classmethod
    def _rows(cls, v: object) -> object:
        if isinstance(v, int) and not isinstance(v, bool):
            v = str(v)
        if isinstance(v, str) and not _ROWS.match(v):
            raise ValueError('rows must look like "12" or "12-15"')
        return v

    def is_empty(self) -> bool:
        return all(v is None for v in self.model_dump().values())


class EvalQuery(BaseModel):
    """One line of a query file."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=4000)
    document: str = Field(min_length=1, description="expected document: id, path or file name")
    location: ExpectedLocation | None = None
    answer: str | None = Field(None, min_length=1)
    mode: SearchMode | None = None
    options: dict[str, Any] | None = Field(
        None, description="ranking options of the search tool for this line, e.g. {'fusion': 'rrf'}"
    )
    category: str | None = None
    id: str | None = None

    @field_validator("options")
    @classmethod
    def _ranking_options(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v and (unknown := set(v) - set(CASE_OPTIONS)):
            raise ValueError(f"not a ranking option: {', '.join(sorted(unknown))}")
        # checked as the search tool checks them: a bad value fails at load, not mid-run
        if not v:
            return None
        checked = SearchRequest.model_validate({"query": "-", **v})
        return checked.model_dump(mode="json", include=set(v))

    @field_validator("query", "document")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("is blank")
        return v


def parse_queries(text: str, source: str = "queries") -> list[EvalQuery]:
    """Every query of a JSONL file; the first bad line raises QueryFileError naming it."""
    out: list[EvalQuery] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise QueryFileError(f"{source} line {n}: invalid JSON ({exc.msg})") from None
        if not isinstance(raw, dict):
            raise QueryFileError(f"{source} line {n}: expected a JSON object")
        try:
            out.append(EvalQuery.model_validate(raw))
        except ValidationError as exc:
            raise QueryFileError(f"{source} line {n}: {_first_problem(exc)}") from None
    if not out:
        raise QueryFileError(f"{source}: no queries")
    return out


def _first_problem(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    if err["type"] == "missing":
        return f"missing field '{where}'"
    if err["type"] == "extra_forbidden":
        return f"unknown field '{where}'"
    if err["type"] in ("literal_error", "enum") and where == "mode":
        return f"'{where}' must be one of {', '.join(m.value for m in EVAL_MODES)} (got {err['input']!r})"
    msg = err["msg"].removeprefix("Value error, ")
    return f"'{where}' {msg}" if where else msg


# ------------------------------------------------------------------------------------------
# matching
# ------------------------------------------------------------------------------------------


def _norm(text: str) -> str:
    """Compared without case, width or whitespace: PDF and HTML extraction move spaces."""
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def _row_range(rows: str | None) -> tuple[int, int] | None:
    m = _ROWS.match(rows or "")
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2) or m.group(1))


def location_matches(expected: ExpectedLocation, actual: Location) -> bool:
    """Every field the query gives matches the hit; expected rows lie inside the hit's."""
    if expected.page is not None and actual.page != expected.page:
        return False
    if expected.slide is not None and actual.slide != expected.slide:
        return False
    if expected.sheet is not None and _norm(actual.sheet or "") != _norm(expected.sheet):
        return False
    if expected.section is not None and _norm(actual.section or "") != _norm(expected.section):
        return False
    if expected.rows is not None:
        want, have = _row_range(expected.rows), _row_range(actual.rows)
        if want is None or have is None or not (have[0] <= want[0] and want[1] <= have[1]):
            return False
    return True


def shown_text(hit: SearchHit) -> str:
    """What a reader of the hit sees: its snippets, the matched context and the preview."""
    parts = [s.content for s in hit.snippets]
    parts += [hit.matched_context or "", hit.preview]
    return "\n".join(parts)


def answer_in(answer: str, text: str) -> bool:
    return _norm(answer) in _norm(text)


# ------------------------------------------------------------------------------------------
# languages (script-based: enough to split a benchmark by query x document language)
# ------------------------------------------------------------------------------------------


def detect_language(text: str) -> str:
    """zh / ja / ko for CJK scripts, en for Latin script (any Latin-script language), or
    mixed. A CJK character carries about as much as three Latin letters."""
    han = kana = hangul = latin = 0
    for ch in text:
        o = ord(ch)
        if 0x3040 <= o <= 0x30FF:
            kana += 1
        elif 0xAC00 <= o <= 0xD7AF or 0x1100 <= o <= 0x11FF:
            hangul += 1
        elif 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0xF900 <= o <= 0xFAFF:
            han += 1
        elif ch.isalpha() and o < 0x250:
            latin += 1
    cjk = 3 * (han + kana + hangul)
    if cjk + latin == 0:
        return "en"
    share = cjk / (cjk + latin)
    if share <= 0.2:
        return "en"
    if share < 0.8:
        return "mixed"
    if kana:
        return "ja"
    return "ko" if hangul > han else "zh"


# ------------------------------------------------------------------------------------------
# running
# ------------------------------------------------------------------------------------------


async def _resolve(
    pool: AsyncConnectionPool, documents: Iterable[str], collection: str | None
) -> dict[str, tuple[set[str], str]]:
    """Expected document -> (its ids, its language); unknown documents get no ids."""
    out: dict[str, tuple[set[str], str]] = {}
    async with pool.connection() as conn:
        for doc in dict.fromkeys(documents):
            ids = {doc_id for doc_id, _ in await catalog.documents_named(conn, doc, collection)}
            lang = detect_language(await catalog.text_sample(conn, list(ids))) if ids else "unknown"
            out[doc] = (ids, lang)
    return out


def modes_for(q: EvalQuery, modes: Sequence[SearchMode]) -> list[SearchMode]:
    """A line's own mode wins; pattern modes (regex) only run for lines that ask for them."""
    specs = [mode_spec(q.mode)] if q.mode else [mode_spec(m) for m in modes]
    return [s.name for s in specs if q.mode or not s.pattern]


async def run_queries(
    service: SearchService,
    queries: Sequence[EvalQuery],
    *,
    modes: Sequence[SearchMode] = (SearchMode.HYBRID,),
    collection: str | None = None,
) -> tuple[list[Outcome], list[str]]:
    """Every query in its modes through the search service. Returns the outcomes and
    the expected documents that are not in the collection (scored as misses)."""
    resolved = await _resolve(service.pool, (q.document for q in queries), collection)
    outcomes: list[Outcome] = []
    for q in queries:
        ids, doc_lang = resolved[q.document]
        for mode in modes_for(q, modes):
            page = await service.search(
                SearchRequest(
                    query=q.query,
                    mode=mode,
                    limit=DEPTH,
                    filters=SearchFilters(collection=collection),
                    max_tokens=25000,
                    **(q.options or {}),
                ),
                caller="eval",
            )
            outcomes.append(_score(q, mode, ids, doc_lang, page.data.results))
    missing = [doc for doc, (ids, _) in resolved.items() if not ids]
    return outcomes, missing


def _score(
    q: EvalQuery, mode: SearchMode, ids: set[str], doc_lang: str, hits: list[SearchHit]
) -> Outcome:
    own = [h for h in hits if h.document_id in ids]
    first = own[0] if own else None
    has_location = q.location is not None and not q.location.is_empty()
    location_ok = answer_ok = location_rank = None
    if has_location:
        at = [i for i, h in enumerate(own, 1) if location_matches(q.location, h.location)]  # type: ignore[arg-type]
        location_rank = at[0] if at else None
        location_ok = location_rank == 1
    if q.answer:
        answer_ok = first is not None and answer_in(q.answer, shown_text(first))
    return Outcome(
        query=q.query,
        mode=mode,
        category=q.category or "uncategorised",
        document=q.document,
        query_language="regex" if mode_spec(mode).pattern else detect_language(q.query),
        document_language=doc_lang,
        found=bool(ids),
        rank=first.rank if first is not None else None,
        location_ok=location_ok,
        answer_ok=answer_ok,
        first_location=first.location.model_dump(exclude_none=True) if first else None,
        top=[h.path for h in hits[:3]],
        id=q.id,
        location_rank=location_rank,
        first_chunk_id=first.chunk_id if first else None,
    )
