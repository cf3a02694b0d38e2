"""Output data of the write tools (the envelope's `data`); their input models are the
service's (DocumentSource, DocumentPatch in services/saved.py)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from pgrag.services.saved import SavedItem


class SavedData(BaseModel):
    document_id: str
    path: str
    folder: str = Field(description="the folder under saved/, '' for the top")
    title: str
    chunks: int


class UpdatedData(BaseModel):
    updated: bool
    document_id: str
    path: str
    chunks: int


class DeletedData(BaseModel):
    deleted: bool
    document_id: str
    path: str


class FoundData(BaseModel):
    items: list[SavedItem]
