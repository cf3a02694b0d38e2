"""The optional rerank model: which, where, how much it is sent and how long it may take."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator


class RerankSettings(BaseModel):
    """The optional rerank model: which, where, how much it is sent and how long it may take."""

    rerank_model: str | None = Field(
        None,
        examples=["cohere/rerank-v3.5"],
        description="any litellm rerank model (`cohere/rerank-v3.5`, `jina_ai/…`, `infinity/…`, "
        "`hosted_vllm/…`): reranks the top fused candidates; unset: no reranking",
    )
    rerank_api_base: str | None = Field(
        None, description="passed to litellm as api_base (a self-hosted rerank server)"
    )
    rerank_api_key: str | None = Field(None, description="passed to litellm as api_key")
    rerank_top_n: int = Field(
        30, ge=2, le=100, description="fused candidates sent to the reranker (the first ranks)"
    )
    rerank_max_tokens: int = Field(
        512, ge=16, le=8192, description="tokens of one candidate sent (longer ones are cut)"
    )
    rerank_max_total_tokens: int = Field(
        16000,
        ge=64,
        le=1_000_000,
        description="tokens sent per search; candidates past it keep their fused rank",
    )
    rerank_timeout_s: float = Field(
        5.0, gt=0, le=8, description="seconds the reranker may take; then the fused order"
    )

    @field_validator("rerank_model")
    @classmethod
    def _rerank_has_provider(cls, value: str | None) -> str | None:
        if not value:
            return None
        provider, _, name = value.partition("/")
        if not provider or not name:
            raise ValueError("expects provider/model, e.g. cohere/rerank-v3.5")
        return value
