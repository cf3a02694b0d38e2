"""What the transports serve and how: toolsets, keys, hosts, admission, web, write and graph
tools."""

from __future__ import annotations

import ipaddress
import re

from pydantic import BaseModel, Field, field_validator

from pgrag.config.toolsets import MODULES as TOOLSETS

AUTH_FAILURE_BURST = 20  # failed guesses an address may make at once (services/auth_throttle.py)


class ServingSettings(BaseModel):
    """What the transports serve and how: toolsets, keys, hosts, admission, web, write and graph tools."""

    toolsets: str = Field("core", description="comma list of: " + ", ".join(TOOLSETS))
    read_only: bool | None = Field(
        None,
        examples=[True],
        description="refuse write tools; default true for HTTP, false for the CLI",
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
        examples=["https://app.example.com"],
        description="comma list of browser `Origin`s HTTP accepts besides its own "
        "(`https://app.example.com`, `http://localhost:*`); unset: loopback ones on loopback",
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
        0.1,
        ge=0,
        le=1,
        description="share of time one HTTP caller's slow calls may take; past it, its next call"
        " waits while other callers' calls run (0: off)",
    )
    trusted_proxies: str | None = Field(
        None,
        examples=["10.0.0.5"],
        description="comma list of proxy addresses or networks (`10.0.0.5`, `10.0.0.0/8`) whose"
        " `X-Forwarded-For` names the caller; unset: none, a caller is its peer address",
    )
    auth_failure_burst: int = Field(
        AUTH_FAILURE_BURST,
        ge=1,
        description="failed sign-ins and unknown bearer keys one address may make at once; then one"
        " more every 6 s, past it 429 RATE_LIMITED",
    )
    searxng_url: str | None = Field(
        None, examples=["http://searxng:8080"], description="enables `web_search`"
    )
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
        unknown = [n for n in names if n not in TOOLSETS]
        if unknown or not names:
            raise ValueError(f"unknown toolset(s) {unknown}; accepts {', '.join(TOOLSETS)}")
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
