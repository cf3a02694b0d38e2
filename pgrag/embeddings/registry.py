"""Choose the provider for a model string."""

from __future__ import annotations

from pgrag.config.embedding import EmbeddingSettings
from pgrag.embeddings.base import EmbeddingProvider


def make_provider(settings: EmbeddingSettings, model: str | None = None) -> EmbeddingProvider:
    provider = _provider(settings, model or settings.embedding_model)
    provider.cache_queries(settings.query_cache_size)
    return provider


def _provider(settings: EmbeddingSettings, model: str) -> EmbeddingProvider:
    provider, _, _name = model.partition("/")
    if provider == "local":
        from pgrag.embeddings.local import LocalE5Provider

        if model != "local/multilingual-e5-small":
            raise ValueError(
                f"unknown local model {model}; the bundled one is local/multilingual-e5-small"
            )
        return LocalE5Provider(
            model,
            query_threads=settings.embedding_query_threads,
            threads=settings.embedding_threads,
            home=settings.home,
            engine=settings.embedding_engine,
        )
    if provider == "hash":
        from pgrag.embeddings.hashing import HashEmbedder

        return HashEmbedder(model)
    from pgrag.embeddings.remote import LiteLLMProvider

    return LiteLLMProvider(
        model,
        api_base=settings.embedding_api_base,
        api_key=settings.embedding_api_key,
        dimensions=settings.embedding_dimensions,
        batch_size=settings.embedding_batch_size,
        concurrency=settings.embedding_concurrency,
        timeout=settings.embedding_timeout_s,
        retries=settings.embedding_retries,
    )
