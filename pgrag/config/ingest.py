"""Ingestion: chunking, OCR and the parse worker's bounds."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from pgrag.config.database import HomeSettings


class IngestSettings(HomeSettings):
    """Ingestion: chunking, OCR and the parse worker's bounds."""

    collection: str = Field(
        "default", min_length=1, max_length=200, description="default collection"
    )
    chunk_tokens: int = Field(350, ge=32, le=8000, description="target chunk size in tokens")
    chunk_overlap: int = Field(40, ge=0, le=2000, description="overlap between chunks in tokens")
    chunk_context_tokens: int = Field(
        48,
        ge=0,
        le=200,
        description="bound of the document context every chunk carries (its document's lead"
        " after the title), in tokens; 0: none",
    )
    backfill_index_rows: int = Field(
        20_000,
        ge=0,
        description="a table source's backfill of at least this many rows, into a collection"
        " with fewer vectors, builds the collection's vector index once at its end instead"
        " of growing it row by row (semantic search scans exactly meanwhile); 0: never",
    )
    index_build_memory: str = Field(
        "1GB",
        pattern=r"^[1-9][0-9]*(kB|MB|GB)$",
        description="PostgreSQL's maintenance_work_mem for that build: the graph built in"
        " memory is several times faster (about 2 kB a 384-dimension vector)",
    )
    ocr_engine: Literal["auto", "rapidocr", "tesseract", "off"] = Field(
        "auto",
        description="OCR for scanned PDF pages and images: `auto` (Tesseract, else RapidOCR),"
        " `rapidocr`, `tesseract` or `off`",
    )
    ocr_languages: str = Field(
        "chi_sim+eng",
        pattern=r"^[a-z_]+(\+[a-z_]+)*$",
        description="OCR languages, Tesseract names joined by `+` (RapidOCR: chi_sim, eng)",
    )
    ocr_workers: int = Field(2, ge=1, le=32, description="pages OCR'd in parallel")
    ocr_page_timeout_s: float = Field(
        120.0,
        gt=0,
        description="seconds one page may take in OCR; then its reader is killed, the page left empty",
    )
    ocr_max_pages: int = Field(
        200, ge=1, le=100_000, description="pages OCR'd per document; later ones are left empty"
    )
    ocr_document_timeout_s: float = Field(
        900.0,
        gt=0,
        description="seconds of OCR per document; pages not read by then are left empty",
    )
    follow_links_inside_root: bool = Field(
        False,
        description="ingest symlinks whose target stays inside the ingested folder "
        "(links leaving it are never followed)",
    )
    parse_memory_mb: int = Field(
        1024,
        ge=256,
        le=1_048_576,
        description="address space of a parse worker (MB); a file needing more fails TOO_LARGE",
    )
    parse_timeout_s: float = Field(
        300.0,
        gt=0,
        description="seconds a file's parse may go without progress (OCR pages count); "
        "then it fails TIMEOUT",
    )
    parse_workers: int = Field(
        2,
        ge=1,
        le=32,
        description="files parsed (and OCR'd) at once by one pgrag process: ingest, watch "
        "and uploads together",
    )
    parse_max_chars: int = Field(
        64_000_000,
        ge=1_000_000,
        description="characters of text one file may extract to (a small file less: "
        "docs/ingest-limits.md); past it the file fails TOO_LARGE",
    )
    parse_max_chunks: int = Field(
        100_000, ge=1_000, description="chunks one file may make; past it the file fails TOO_LARGE"
    )

    @model_validator(mode="after")
    def _overlap_below_size(self) -> IngestSettings:
        if self.chunk_overlap >= self.chunk_tokens:
            raise ValueError("chunk_overlap must be smaller than chunk_tokens")
        return self
