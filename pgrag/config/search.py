"""How searches answer: snippets, the content mode, and the regex ranking's time budget."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

REGEX_TIMEOUT_MS = 1000


class SearchSettings(BaseModel):
    """How searches answer: snippets, the content mode, and the regex ranking's time budget."""

    search_max_snippets: int = Field(10, ge=1, le=50, description="snippets per result (1..50)")
    regex_timeout_ms: int = Field(
        REGEX_TIMEOUT_MS,
        ge=50,
        le=60_000,
        description="milliseconds PostgreSQL may match one regex search; then it ends `TIMEOUT`",
    )
    return_snippet_summary: bool = Field(True, description="summary in `matched_context`")
    default_content_mode: Literal["smart_extract", "full"] = Field(
        "smart_extract", description="`smart_extract` or `full`"
    )
