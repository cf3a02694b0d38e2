"""What a client may register (RFC 7591) or publish in a client ID metadata document: anyone
can do either without signing in, so every field is bounded, and a redirect URI must be one
a browser can be sent to safely (RFC 9700 §2.1, RFC 8252 §7): HTTPS, plain HTTP to a
loopback host only, or an app's own scheme; never `javascript:`, `data:` or `file:`."""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from pgrag.errors import InvalidArgument

MAX_NAME = 100  # characters of client_name
MAX_REDIRECTS = 5
MAX_URI = 1000  # characters of any URI field
MAX_FIELD = 1000  # characters of any other text field
MAX_LIST = 10  # entries of any other list (contacts, grant_types…)
NEVER_SCHEMES = {"javascript", "data", "file", "vbscript", "blob", "about", "filesystem"}
LOOPBACK_NAMES = {"localhost"}


def is_loopback_host(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_redirect_uri(uri: str) -> None:
    """Refuse a redirect URI a consent could send a browser somewhere unsafe with."""
    if len(uri) > MAX_URI:
        raise InvalidArgument(f"a redirect URI is longer than {MAX_URI} characters")
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if not scheme or scheme in NEVER_SCHEMES:
        raise InvalidArgument(f"redirect URI scheme {scheme or '(none)'!r} is not allowed")
    if parts.fragment:
        raise InvalidArgument("a redirect URI has no fragment (RFC 6749 §3.1.2)")
    if scheme == "http" and not is_loopback_host(parts.hostname or ""):
        raise InvalidArgument(
            "a plain-HTTP redirect URI must point to a loopback host (127.0.0.1, [::1], "
            "localhost); use HTTPS elsewhere"
        )
    if scheme in ("http", "https") and not parts.hostname:
        raise InvalidArgument("a redirect URI needs a host")


def safe_redirect_uris(uris: list[str]) -> list[str]:
    """The redirect URIs of a client stored before these rules that still pass them."""
    kept = []
    for uri in uris:
        try:
            check_redirect_uri(uri)
        except InvalidArgument:
            continue
        kept.append(uri)
    return kept


def _check_value(field: str, value: Any) -> None:
    if isinstance(value, str):
        limit = MAX_NAME if field == "client_name" else MAX_FIELD
        if len(value) > limit:
            raise InvalidArgument(f"{field} is longer than {limit} characters")
    elif isinstance(value, list):
        limit = MAX_REDIRECTS if field == "redirect_uris" else MAX_LIST
        if len(value) > limit:
            raise InvalidArgument(f"{field} has more than {limit} entries")
        for item in value:
            _check_value(field, item)
    elif isinstance(value, dict):
        raise InvalidArgument(f"{field}: nested objects are not accepted here")


def check_metadata(info: dict[str, Any]) -> None:
    """Refuse client metadata past the bounds or with an unsafe redirect URI."""
    for field, value in info.items():
        if field != "jwks":
            _check_value(field, value)
        elif len(str(value)) > MAX_FIELD * 8:
            raise InvalidArgument("jwks is too large")
    for uri in info.get("redirect_uris") or []:
        check_redirect_uri(str(uri))
