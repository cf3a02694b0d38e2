"""Client ID metadata documents: a client whose `client_id` is an HTTPS URL publishes its
metadata there, and the authorization server fetches it instead of a registration (the
MCP authorization spec's preferred way). The document's `client_id` must equal the URL.
Plain-HTTP loopback URLs only with PGRAG_OAUTH_LOOPBACK_CLIENTS (tests, local clients).
The fetch is bounded (size, time, no redirects); a refused document is one warning line."""

from __future__ import annotations

import ipaddress
import json
import logging
from typing import Any
from urllib.parse import urlsplit

import httpx2
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import ValidationError

log = logging.getLogger(__name__)
MAX_BYTES = 64 * 1024
TIMEOUT_S = 5.0
LOOPBACK_NAMES = {"localhost"}


class RefusedDocument(Exception):
    """Why a client ID metadata document cannot be used."""


def is_document_id(client_id: str) -> bool:
    return client_id.startswith(("https://", "http://"))


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _loopback(host: str) -> bool:
    address = _address(host)
    return host in LOOPBACK_NAMES or (address is not None and address.is_loopback)


def check_url(client_id: str, *, loopback_allowed: bool) -> None:
    parts = urlsplit(client_id)
    if parts.fragment or not parts.path.strip("/"):
        raise RefusedDocument("the client ID URL needs a path and no fragment")
    address = _address(parts.hostname or "")
    if parts.scheme == "https" and (address is None or address.is_global):
        return
    if not (loopback_allowed and parts.scheme == "http" and _loopback(parts.hostname or "")):
        # an internal address is no client's public identity, and fetching it would let
        # anyone make this server call inside its network
        raise RefusedDocument(
            "a client ID metadata document must be served over HTTPS by a public host"
        )


async def _download(url: str) -> dict[str, Any]:
    async with (
        httpx2.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False) as http,
        http.stream("GET", url, headers={"Accept": "application/json"}) as r,
    ):
        if r.status_code != 200:
            raise RefusedDocument(f"the document answered HTTP {r.status_code}")
        body = b""
        async for chunk in r.aiter_bytes():
            body += chunk
            if len(body) > MAX_BYTES:
                raise RefusedDocument(f"the document is larger than {MAX_BYTES} bytes")
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise RefusedDocument("the document is not JSON") from exc
    if not isinstance(doc, dict):
        raise RefusedDocument("the document is not a JSON object")
    return doc


async def fetch_client(client_id: str, *, loopback_allowed: bool) -> OAuthClientInformationFull:
    """The client a metadata document describes; RefusedDocument when it cannot be used."""
    check_url(client_id, loopback_allowed=loopback_allowed)
    try:
        doc = await _download(client_id)
    except httpx2.HTTPError as exc:
        raise RefusedDocument(f"the document could not be fetched ({type(exc).__name__})") from exc
    if doc.get("client_id") != client_id:
        raise RefusedDocument("the document's client_id is not its URL")
    if doc.get("token_endpoint_auth_method", "none") != "none" or "client_secret" in doc:
        raise RefusedDocument(
            "a metadata-document client is public: token_endpoint_auth_method none"
        )
    doc.setdefault("token_endpoint_auth_method", "none")
    try:
        return OAuthClientInformationFull.model_validate(doc)
    except ValidationError as exc:
        raise RefusedDocument(
            f"the document is not client metadata: {exc.errors()[0]['msg']}"
        ) from exc


async def client_from_document(
    client_id: str, *, loopback_allowed: bool
) -> OAuthClientInformationFull | None:
    try:
        return await fetch_client(client_id, loopback_allowed=loopback_allowed)
    except RefusedDocument as exc:
        log.warning("OAuth client ID metadata document refused: %s", exc)
        return None
