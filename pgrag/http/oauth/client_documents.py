"""Client ID metadata documents: a client whose `client_id` is an HTTPS URL publishes its
metadata there, and the authorization server fetches it instead of a registration (the
MCP authorization spec's preferred way). The document's `client_id` must equal the URL.

Anyone can make this server fetch such a URL (an unauthenticated /authorize), so the fetch
follows the SSRF rules of the OAuth security BCP (RFC 9700 §4.15) and the MCP spec's
security considerations: HTTPS only; the host is resolved once and every address it has
must be global (no loopback, private, link-local, shared or reserved address, whatever
the spelling: `localhost`, `127.1`, `2130706433`, `0x7f000001`, `[::ffff:127.0.0.1]`);
the connection goes to that checked address (a second lookup cannot rebind it), with the
name kept for TLS; no redirects, no proxy, a small body and a short deadline.
PGRAG_OAUTH_LOOPBACK_CLIENTS lets loopback addresses (and plain HTTP to them) through, for
tests and local development. A refused document is one warning line and its reason is
shown to the browser (`last_refusal`)."""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import ValidationError

from pgrag.errors import InvalidArgument
from pgrag.services.oauth_clients import check_metadata

log = logging.getLogger(__name__)
MAX_BYTES = 16 * 1024
TIMEOUT_S = 3.0  # for the lookup, the connection and the body together
NAT64 = ipaddress.ip_network("64:ff9b::/96")
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]
# why the last document of this request was refused (the /authorize page shows it)
last_refusal: ContextVar[list[str] | None] = ContextVar("pgrag_oauth_refusal", default=None)


class RefusedDocument(Exception):
    """Why a client ID metadata document cannot be used."""


def is_document_id(client_id: str) -> bool:
    return client_id.startswith(("https://", "http://"))


async def system_resolve(host: str, port: int) -> list[str]:
    """Every address `host` has (numeric forms such as `127.1` resolve too)."""
    found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(sockaddr[0]) for *_, sockaddr in found]


def _embedded(address: Address) -> Address:
    """The IPv4 address an IPv6 one carries (mapped, 6to4, NAT64), else itself."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address in NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def allowed_address(text: str, *, loopback_allowed: bool) -> bool:
    """May this server connect to `text` for a client's document?"""
    try:
        address = _embedded(ipaddress.ip_address(text.split("%", 1)[0]))
    except ValueError:
        return False
    if address.is_loopback:
        return loopback_allowed
    return address.is_global and not address.is_multicast


def check_url(client_id: str, *, loopback_allowed: bool) -> tuple[str, str, int]:
    """The (scheme, host, port) of a client ID URL fit to fetch; RefusedDocument if not."""
    parts = urlsplit(client_id)
    if parts.fragment or not parts.path.strip("/"):
        raise RefusedDocument("the client ID URL needs a path and no fragment")
    if parts.username is not None or parts.password is not None:
        raise RefusedDocument("the client ID URL must not carry credentials")
    scheme = parts.scheme.lower()
    if scheme != "https" and not (loopback_allowed and scheme == "http"):
        raise RefusedDocument("a client ID metadata document must be served over HTTPS")
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError as exc:
        raise RefusedDocument("the client ID URL has an invalid port") from exc
    if not parts.hostname:
        raise RefusedDocument("the client ID URL has no host")
    return scheme, parts.hostname, port


async def checked_address(
    host: str, port: int, *, scheme: str, loopback_allowed: bool, resolve: Resolver
) -> str:
    """The one address to connect to: every address of `host` must be allowed."""
    try:
        addresses = await resolve(host, port)
    except OSError as exc:
        raise RefusedDocument(f"the host {host} does not resolve") from exc
    if not addresses or not all(
        allowed_address(a, loopback_allowed=loopback_allowed) for a in addresses
    ):
        # an internal address is no client's public identity, and fetching it would let
        # anyone make this server call inside its network
        raise RefusedDocument(
            "a client ID metadata document must be served by a public host "
            f"({host} has a loopback, private or reserved address)"
        )
    first = addresses[0].split("%", 1)[0]
    if scheme == "http" and not ipaddress.ip_address(first).is_loopback:
        raise RefusedDocument("a client ID metadata document must be served over HTTPS")
    return first


async def _download(client_id: str, address: str, host: str, port: int) -> dict[str, Any]:
    parts = urlsplit(client_id)
    literal = f"[{address}]" if ":" in address else address
    url = urlunsplit(parts._replace(netloc=f"{literal}:{port}"))
    headers = {"Accept": "application/json", "Host": parts.netloc.rsplit("@", 1)[-1]}
    async with (
        httpx2.AsyncClient(timeout=TIMEOUT_S, follow_redirects=False, trust_env=False) as http,
        http.stream("GET", url, headers=headers, extensions={"sni_hostname": host}) as r,
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


def _client(client_id: str, doc: dict[str, Any]) -> OAuthClientInformationFull:
    if doc.get("client_id") != client_id:
        raise RefusedDocument("the document's client_id is not its URL")
    if doc.get("token_endpoint_auth_method", "none") != "none" or "client_secret" in doc:
        raise RefusedDocument(
            "a metadata-document client is public: token_endpoint_auth_method none"
        )
    doc.setdefault("token_endpoint_auth_method", "none")
    try:
        check_metadata(doc)
        return OAuthClientInformationFull.model_validate(doc)
    except InvalidArgument as exc:
        raise RefusedDocument(f"the document's metadata is refused: {exc.message}") from exc
    except ValidationError as exc:
        raise RefusedDocument(
            f"the document is not client metadata: {exc.errors()[0]['msg']}"
        ) from exc


class DocumentFetcher:
    """Fetches client ID metadata documents under the rules above."""

    def __init__(self, *, loopback_allowed: bool, resolve: Resolver = system_resolve) -> None:
        self.loopback_allowed = loopback_allowed
        self.resolve = resolve

    async def fetch(self, client_id: str) -> OAuthClientInformationFull:
        """The client a metadata document describes; RefusedDocument when it cannot be used."""
        scheme, host, port = check_url(client_id, loopback_allowed=self.loopback_allowed)
        try:
            with anyio.fail_after(TIMEOUT_S):
                address = await checked_address(
                    host,
                    port,
                    scheme=scheme,
                    loopback_allowed=self.loopback_allowed,
                    resolve=self.resolve,
                )
                doc = await _download(client_id, address, host, port)
        except TimeoutError as exc:
            raise RefusedDocument(f"the document did not arrive within {TIMEOUT_S:g} s") from exc
        except httpx2.HTTPError as exc:
            raise RefusedDocument(
                f"the document could not be fetched ({type(exc).__name__})"
            ) from exc
        return _client(client_id, doc)

    async def client(self, client_id: str) -> OAuthClientInformationFull | None:
        try:
            return await self.fetch(client_id)
        except RefusedDocument as exc:
            refused(str(exc))
            return None


def refused(reason: str) -> None:
    """Note why a client ID document was refused: one log line, and the reason kept for
    the browser's error page when /authorize is watching (pgrag/http/oauth/endpoints.py)."""
    log.warning("OAuth client ID metadata document refused: %s", reason)
    reasons = last_refusal.get()
    if reasons is not None:
        reasons.append(reason)
