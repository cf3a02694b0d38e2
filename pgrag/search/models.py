"""Search request and result models: the MCP `search` tool's schema is generated from these."""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from pgrag.search.modes import MODES_HELP, ModeSpec, SearchMode, mode_spec

# Literal aliases, not enums: every transport's schema lists them inline
SearchScope = Literal["chunks", "documents"]
ContentMode = Literal["smart_extract", "full", "none"]
Fusion = Literal["adaptive", "rrf"]
# the per-request ranking options (None: the server's default, pgrag.ranking_defaults()); each
# is the name of the field of pgrag.ranking_options it sets (sql/functions/05_defaults.sql)
RANKING_OPTIONS = ("fusion", "lexical_weight", "semantic_weight", "rrf_k")
MAX_WEIGHT = 10.0
MAX_RRF_K = 1000
MetadataValue = str | int | float | bool  # a table source's metadata column, as filtered


def iso_date_text(v: object) -> object:
    """Text must be an ISO date or date-time: "0" is not the Unix epoch here (pydantic's lax
    mode would take it, and the OpenAPI document promises a date)."""
    if isinstance(v, str) and not re.match(r"\d{4}-\d{2}-\d{2}", v.strip()):
        raise ValueError("must be an ISO date (YYYY-MM-DD) or date-time")
    return v


class SearchFilters(BaseModel):
    """Restrict the search; every filter is optional and they combine with AND."""

    model_config = ConfigDict(extra="forbid")

    collection: str | None = Field(None, description="collection (knowledge base) name")
    folder: str | None = Field(None, description="folder prefix, e.g. 'Finance/2024'")
    file_type: str | list[str] | None = Field(
        None, description="extension(s) without dot: pdf, xlsx, md"
    )
    document_ids: list[UUID] | None = Field(
        None, max_length=500, description="only these documents"
    )
    date_from: date | datetime | None = Field(None, description="modified on or after (ISO date)")
    date_to: date | datetime | None = Field(None, description="modified on or before (ISO date)")
    submitter: str | None = None
    author: str | None = None
    tags: list[str] | None = Field(None, description="documents having any of these tags")
    metadata: dict[str, MetadataValue] | None = Field(
        None,
        max_length=20,
        description='documents whose metadata has all these values, e.g. {"customer": '
        '"acme"} (a table source\'s metadata columns)',
    )

    @field_validator("file_type")
    @classmethod
    def _normalise_types(cls, v: str | list[str] | None) -> str | list[str] | None:
        if v is None:
            return None
        items = [v] if isinstance(v, str) else v
        return [t.lower().lstrip(".") for t in items]

    @field_validator("date_from", "date_to", mode="before")
    @classmethod
    def _iso_dates(cls, v: object) -> object:
        return iso_date_text(v)

    @field_validator("folder")
    @classmethod
    def _strip_folder(cls, v: str | None) -> str | None:
        return v.strip("/") if v else v


class SearchRequest(BaseModel):
    """Find passages or documents (each mode's use: search/modes.py)."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=4000, description="question, words, or a regex")
    mode: SearchMode = Field(SearchMode.HYBRID, description=MODES_HELP)
    scope: SearchScope = Field("chunks", description="chunks: passages; documents: best documents")
    limit: int = Field(5, ge=1, le=50, description="results per page")
    threshold: float | None = Field(None, ge=-1.0, le=1.0, description="minimum cosine similarity")
    fusion: Fusion | None = Field(
        None, description="adaptive: BM25 and cosine blended per query; rrf: reciprocal rank fusion"
    )
    lexical_weight: float | None = Field(
        None, ge=0.0, le=MAX_WEIGHT, description="weight of the BM25 leg (0 switches it off)"
    )
    semantic_weight: float | None = Field(
        None, ge=0.0, le=MAX_WEIGHT, description="weight of the cosine leg (0 switches it off)"
    )
    rrf_k: int | None = Field(
        None, ge=1, le=MAX_RRF_K, description="fusion=rrf: the k of 1/(k + rank)"
    )
    filters: SearchFilters = Field(default_factory=SearchFilters)
    content_mode: ContentMode | None = Field(
        None,
        description="smart_extract: keyword snippets (default); full: the document's whole text; none",
    )
    context_chars: int = Field(400, ge=0, le=4000, description="characters around each keyword")
    merge_overlapping: bool = Field(True, description="merge snippets less than 50 chars apart")
    return_scoring_details: bool = Field(False, description="include snippet scoring details")
    explain: bool = Field(False, description="include per-leg ranks and scores")
    rerank: bool = Field(
        True, description="rerank the first fused candidates when the server has a rerank model"
    )
    max_tokens: int = Field(2000, ge=50, le=25000, description="token budget of this page")
    continuation_token: str | None = Field(
        None, max_length=4096, description="from the previous page"
    )

    @field_validator("query")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        v = v.replace("\x00", " ")  # NUL carries no meaning and PostgreSQL cannot store it
        if not v.strip():
            raise ValueError("query is blank")
        return v

    @field_validator("semantic_weight")
    @classmethod
    def _one_leg_weighed(cls, v: float | None, info: ValidationInfo) -> float | None:
        if v == 0 and info.data.get("lexical_weight") == 0:
            raise ValueError("lexical_weight and semantic_weight are both 0: nothing would rank")
        return v

    def ranking_options(self) -> dict[str, object]:
        """The ranking options this request chose (the others stay the server's default)."""
        return {n: v for n in RANKING_OPTIONS if (v := getattr(self, n)) is not None}

    @property
    def spec(self) -> ModeSpec:
        """What the mode runs and shows (search/modes.py)."""
        return mode_spec(self.mode)

    def page_fingerprint_args(self) -> dict[str, object]:
        """What a continuation token must repeat (everything but the page controls)."""
        return self.model_dump(mode="json", exclude={"continuation_token", "max_tokens"})


class ScoringDetails(BaseModel):
    unique_keywords: int
    total_keywords: int
    span: int
    percent_in_doc: float


class Snippet(BaseModel):
    content: str
    file_id: str
    file_name: str
    keywords_matched: list[str]
    original_char_start: int = Field(description="offset into the unit's extracted text")
    original_char_end: int
    relevance_score: float
    scoring_details: ScoringDetails | None = None


class Location(BaseModel):
    page: int | None = None
    section: str | None = None
    sheet: str | None = None
    slide: int | None = None
    rows: str | None = Field(None, description="sheet rows, e.g. '2-41'")


class Context(BaseModel):
    before: str = ""
    after: str = ""


class Explain(BaseModel):
    fusion: str | None = Field(None, description="adaptive (BM25/cosine blend) or rrf")
    lexical_rank: int | None = None
    lexical_score: float | None = None
    semantic_rank: int | None = None
    semantic_score: float | None = None
    fused_score: float | None = None
    regex_matches: int | None = None
    rrf_k: int | None = None
    lexical_weight: float | None = None
    semantic_weight: float | None = None
    coverage_gain: float | None = None
    max_lexical_share: float | None = None
    proximity_weight: float | None = Field(
        None, description="share of BM25 that depends on how close together the words stand"
    )
    query_lang: str | None = Field(None, description="language detected in the query")
    chunk_lang: str | None = Field(None, description="language of the chunk")
    semantic_note: str | None = Field(
        None,
        description="why the semantic leg could not rank the chunk: its vector is still "
        "being computed (the document is searchable by keyword meanwhile)",
    )
    fused_rank: int | None = Field(None, description="rank before reranking")
    rerank_rank: int | None = Field(None, description="rank among the reranked candidates")
    rerank_score: float | None = Field(None, description="the rerank model's relevance score")
    document_context: str | None = Field(
        None,
        description="the document's lead that the chunk carries to BM25 and the embedding "
        "model besides its heading (not part of its text)",
    )


class RowSource(BaseModel):
    """The table row a hit comes from (table sources): join back with its key."""

    table: str = Field(description="the source table, as PostgreSQL names it")
    key: dict[str, object] = Field(description="the row's primary key, column to value")
    source: str = Field(description="the table source's name")


class SearchHit(BaseModel):
    rank: int
    document_id: str
    chunk_id: int
    name: str
    path: str
    score: float
    location: Location
    preview: str
    snippets: list[Snippet] = Field(default_factory=list)
    matched_context: str | None = None
    content: str | None = Field(
        None,
        description="content_mode=full: the document's whole extracted text, cut "
        "to the page's token budget",
    )
    content_truncated: bool | None = Field(
        None, description="full text cut to the budget: read the rest with get_document_data"
    )
    context: Context = Field(default_factory=Context)
    metadata: dict[str, object] = Field(default_factory=dict)
    source: RowSource | None = Field(None, description="the table row of a table source's hit")
    explain: Explain | None = None


class SearchData(BaseModel):
    results: list[SearchHit]
    total_matches: int
    mode: SearchMode
    scope: SearchScope
    degraded: list[str] = Field(default_factory=list)
    model: str | None = None
    took_ms: float
    search_id: int | None = None
    token_count: int = 0
