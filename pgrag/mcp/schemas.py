"""Output data of the core tools (the envelope's `data`); MCP output schemas come from these."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class FolderItem(BaseModel):
    folder: str
    documents: int


class FoldersData(BaseModel):
    folders: list[FolderItem]
    token_count: int = 0


class DocumentItem(BaseModel):
    document_id: str
    name: str
    path: str
    folder: str
    file_type: str
    status: str
    size_bytes: int | None = None
    modified: str | None = None
    title: str | None = None
    collection: str
    ocr_pages: int | None = None  # pages read by OCR (scans, images)


class DocumentsData(BaseModel):
    documents: list[DocumentItem]
    token_count: int = 0


class OutlineData(BaseModel):
    document_id: str
    name: str
    type: str
    outline: dict[str, Any]
    metadata: dict[str, Any]


class ChunkItem(BaseModel):
    chunk_id: int
    ordinal: int
    content: str
    metadata: dict[str, Any]
    disabled: bool = Field(
        default=False, description="taken out of search results (write tool set_chunk_enabled)"
    )


class DocumentContentData(BaseModel):
    document_id: str
    format: str
    content: str | None = None
    chunks: list[ChunkItem] | None = None
    metadata: dict[str, Any] | None = None
    section: str | None = None
    token_count: int = 0


class PageItem(BaseModel):
    page_number: int
    content: str


class PagesData(BaseModel):
    document_id: str
    pages: list[PageItem]
    total_pages: int
    pages_estimated: bool = False
    token_count: int = 0


class SheetData(BaseModel):
    document_id: str
    sheet_name: str | None
    headers: list[str]
    rows: list[list[str]]
    first_row: int = Field(description="spreadsheet row number of rows[0]")
    first_column: int = Field(
        1, description="spreadsheet column number of headers[0] and of each row's first cell"
    )
    total_rows: int
    columns: int
    available_sheets: list[str] = Field(default_factory=list)
    token_count: int = 0


class SlideItem(BaseModel):
    slide_number: int
    title: str | None
    content: str
    notes: str | None = None


class SlidesData(BaseModel):
    document_id: str
    slides: list[SlideItem]
    total_slides: int
    token_count: int = 0


class StatusData(BaseModel):
    counts: dict[str, int] | None = None
    total: int | None = None
    processing: list[dict[str, Any]] | None = None
    failed: list[dict[str, Any]] | None = None
    # searchable by keyword, vectors still being computed: path, embedded of chunks, why
    waiting_for_vectors: list[dict[str, Any]] | None = None
    vectors_pending: dict[str, int] | None = None  # documents and chunks waiting
    ocr: dict[str, Any] | None = None  # pages read by OCR, failed pages, missing engine
    # table sources: rows indexed, pending (exact), failed with the reason, lag
    sources: list[dict[str, Any]] | None = None
    document: dict[str, Any] | None = None
    status: str | None = None
    progress: float | None = None
    message: str | None = None


class EmbeddingData(BaseModel):
    embedding: list[float]
    model: str
    dimensions: int
