"""What an ingestion run reports: each file's outcome, the run's summary, progress events."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from pgrag.ingest.files import SKIP_CODES


class Outcome(StrEnum):
    ADDED = "added"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    REMOVED = "removed"
    FAILED = "failed"
    PENDING = "pending"  # searchable by keyword; its vectors wait for the provider
    SKIPPED = "skipped"


@dataclass
class FileResult:
    path: str
    outcome: Outcome
    chunks: int = 0
    embedded: int = 0  # chunks the model had to embed (the rest came from the cache)
    error_code: str | None = None
    error: str | None = None
    vectors_pending: int = 0  # chunks still without a vector when the run ended


@dataclass
class IngestSummary:
    collection: str
    results: list[FileResult] = field(default_factory=list)
    # documents of earlier runs whose vectors this run computed (or still could not)
    resumed: list[FileResult] = field(default_factory=list)

    def count(self, outcome: Outcome) -> int:
        return sum(1 for r in self.results if r.outcome == outcome)

    @property
    def failures(self) -> list[FileResult]:
        """Files not searchable (failed, or pending with nothing written)."""
        return [
            r
            for r in self.results
            if r.outcome == Outcome.FAILED
            or (r.outcome == Outcome.PENDING and not r.vectors_pending)
        ]

    def refused(self) -> list[str]:
        """Paths skipped as links or special files (files.SKIP_CODES)."""
        return [r.path for r in self.results if r.error_code in SKIP_CODES]

    @property
    def waiting(self) -> list[FileResult]:
        """Documents searchable by keyword whose vectors are not all written yet."""
        return [r for r in self.results + self.resumed if r.vectors_pending]

    @property
    def changed(self) -> bool:
        return any(
            r.outcome in (Outcome.ADDED, Outcome.UPDATED, Outcome.REMOVED) for r in self.results
        )


# scan | file_start | ocr (pages) | file_done (keyword-searchable) | embed (a document's
# chunks handed to the model) | vectors (chunks of the run embedded and written, of those
# queued so far)
IngestEventKind = Literal["scan", "file_start", "ocr", "file_done", "embed", "vectors"]


@dataclass(frozen=True)
class IngestEvent:
    kind: IngestEventKind
    path: str = ""
    total: int = 0
    done: int = 0
    result: FileResult | None = None


Reporter = Callable[[IngestEvent], None]
