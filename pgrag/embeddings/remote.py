"""Any litellm embedding model (openai/..., ollama/..., an OpenAI-compatible api_base)."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import numpy as np
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from pgrag.embeddings.base import EmbeddingProvider, normalise
from pgrag.errors import UpstreamError

log = logging.getLogger(__name__)


def import_litellm() -> Any:
    # imported lazily: ~3 s and 165 MB; and never fetch the cost map from GitHub
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def _is_transient(exc: BaseException) -> bool:
    litellm = import_litellm()
    transient = (
        litellm.exceptions.RateLimitError,
        litellm.exceptions.APIConnectionError,
        litellm.exceptions.Timeout,
        litellm.exceptions.InternalServerError,
        litellm.exceptions.ServiceUnavailableError,
        litellm.exceptions.BadGatewayError,
    )
    return isinstance(exc, transient)


class LiteLLMProvider(EmbeddingProvider):
    def __init__(
        self,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 64,
        concurrency: int = 4,
        timeout: float = 30.0,
        retries: int = 3,
    ) -> None:
        self.model = model
        self.batch_size = batch_size
        self._api_base = api_base
        self._api_key = api_key
        self._requested_dims = dimensions
        self._dims: int | None = dimensions
        self._timeout = timeout
        self._retries = retries
        self._semaphore = asyncio.Semaphore(concurrency)

    @property
    def dimensions(self) -> int:
        if self._dims is None:
            raise RuntimeError("dimensions unknown until the first call; use probe_dimensions()")
        return self._dims

    async def probe_dimensions(self) -> int:
        if self._dims is None:
            await self._embed(["dimension probe"], is_query=True)
        return self.dimensions

    async def _call(self, texts: list[str]) -> Any:
        litellm = import_litellm()
        # retries are ours (tenacity, with backoff): the SDKs underneath must not add their own
        kwargs: dict[str, Any] = {
            "model": self.model,
            "input": texts,
            "timeout": self._timeout,
            "max_retries": 0,
            "num_retries": 0,
        }
        if self._api_base:
            kwargs["api_base"] = self._api_base
        if self._api_key:
            kwargs["api_key"] = self._api_key
        if self._requested_dims:
            kwargs["dimensions"] = self._requested_dims
        return await litellm.aembedding(**kwargs)

    async def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._retries + 1),
            wait=wait_exponential_jitter(multiplier=0.5, max=8),
            retry=retry_if_exception(_is_transient),
            reraise=True,
        )
        try:
            async with self._semaphore:
                async for attempt in retrying:
                    with attempt:
                        response = await self._call(texts)
        except Exception as exc:
            where = self._api_base or "the provider's default endpoint"
            raise UpstreamError(
                f"embedding provider {self.model} at {where} failed: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}. "
                "Check that it is running and PGRAG_EMBEDDING_API_BASE / _API_KEY are right.",
                detail={"model": self.model, "api_base": self._api_base},
            ) from exc
        rows = sorted(response.data, key=lambda d: d["index"])
        vectors = normalise(np.array([d["embedding"] for d in rows], dtype=np.float32))
        if vectors.shape[0] != len(texts):
            raise UpstreamError(
                f"embedding provider {self.model} returned {vectors.shape[0]} vectors for {len(texts)} texts"
            )
        if self._dims is None:
            self._dims = int(vectors.shape[1])
        elif vectors.shape[1] != self._dims:
            raise UpstreamError(
                f"embedding provider {self.model} returned {vectors.shape[1]} dimensions, expected {self._dims}"
            )
        return vectors
