"""The one way a configured process builds an Ingestor (the CLI's `ingest`, `serve --watch`,
REST uploads): collection, chunk size and overlap, OCR options all from the settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from psycopg_pool import AsyncConnectionPool

from pgrag.config.ingest import IngestSettings
from pgrag.embeddings.base import EmbeddingProvider
from pgrag.store.interrupted import fail_interrupted
from pgrag.store.vectors import collections_waiting

if TYPE_CHECKING:
    from pgrag.ingest.pipeline import Ingestor, Reporter


def make_ingestor(
    settings: IngestSettings,
    pool: AsyncConnectionPool,
    provider: EmbeddingProvider,
    *,
    collection: str | None = None,
    reporter: Reporter | None = None,
    refresh: bool = False,
) -> Ingestor:
    """An Ingestor for `collection` (default: the settings' collection). The ingestion
    modules load here, not at import: a server that never ingests does not pay for them."""
    from pgrag.ingest.bounds import OutputLimits
    from pgrag.ingest.ocr import OcrOptions
    from pgrag.ingest.parse_worker import ParseOptions
    from pgrag.ingest.pipeline import Ingestor

    return Ingestor(
        pool,
        provider,
        collection=collection or settings.collection,
        chunk_tokens=settings.chunk_tokens,
        chunk_overlap=settings.chunk_overlap,
        ocr=OcrOptions.from_settings(settings),
        parse=ParseOptions(
            memory_mb=settings.parse_memory_mb,
            timeout_s=settings.parse_timeout_s,
            follow_links=settings.follow_links_inside_root,
            workers=settings.parse_workers,
            attempts_dir=settings.home / "parse-attempts",
            context_tokens=settings.chunk_context_tokens,
            limits=OutputLimits(settings.parse_max_chars, settings.parse_max_chunks),
        ),
        reporter=reporter,
        refresh=refresh,
    )


async def resume_vectors(
    settings: IngestSettings, pool: AsyncConnectionPool, provider: EmbeddingProvider
) -> None:
    """The vectors earlier runs left missing (killed between the phases, provider down), in
    every collection embedded with the provider's model: `pgrag serve` at start. First,
    documents whose writer died (an upload killed while it was written) are marked failed."""
    async with pool.connection() as conn:
        await fail_interrupted(conn)
        names = await collections_waiting(conn, provider.model)
    for name in names:
        await make_ingestor(settings, pool, provider, collection=name).resume()
