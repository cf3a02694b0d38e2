"""Embedding providers behind one small interface, plus the content-hash cache."""

from pgrag.embeddings.base import EmbeddingProvider
from pgrag.embeddings.registry import make_provider

__all__ = ["EmbeddingProvider", "make_provider"]
