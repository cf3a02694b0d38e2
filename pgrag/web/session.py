"""Console sign-in: an API key, posted once, exchanged for a signed session cookie.

The cookie holds the key's fingerprint (never the key), a CSRF token and when it was
issued, signed with a secret the process draws at start (sessions end with the process).
Sign-out ends a session on the server too: its token is remembered as ended until the
cookie would have expired anyway, so a copy of the cookie is worth nothing after it.
A request's caller is the configured key whose fingerprint the cookie names: removing a
key from PGRAG_API_KEYS ends its sessions. With no keys configured on a loopback server
there is no sign-in (the anonymous caller, as the REST API has); with no keys on any other
address the console refuses everyone (the REST API would answer anyone: the console, which
a browser reaches, does not)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

COOKIE = "pgrag_console"
MAX_AGE_S = 12 * 3600


class KeyLike(Protocol):
    """An API key as the HTTP layer parsed it (pgrag.http.auth.ApiKey)."""

    @property
    def key(self) -> str: ...

    @property
    def collections(self) -> list[str] | None: ...

    @property
    def caller(self) -> str: ...


@dataclass(frozen=True)
class Caller:
    name: str  # the audit name REST gives the same key ("key:…" or "anonymous")
    scope: list[str] | None  # collections the caller may read (None = all)


ANONYMOUS = Caller("anonymous", None)


@dataclass(frozen=True)
class Session:
    key_id: str  # the key's fingerprint; "" before sign-in (and with no sign-in)
    csrf: str
    issued: int


def fingerprint(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class Sessions:
    """Signs and reads session cookies; resolves a session to its caller."""

    def __init__(self, keys: Sequence[KeyLike], *, loopback: bool) -> None:
        self._secret = secrets.token_bytes(32)
        self._keys = {fingerprint(k.key): k for k in keys}
        self.sign_in_needed = bool(self._keys)
        self.closed = not self._keys and not loopback
        self._ended: dict[str, int] = {}  # CSRF token (the session's id) -> when issued

    def new(self, key_id: str = "") -> Session:
        return Session(key_id, secrets.token_urlsafe(24), int(time.time()))

    def dump(self, session: Session) -> str:
        raw = json.dumps([session.key_id, session.csrf, session.issued]).encode()
        body = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        return body + "." + self._sign(body)

    def load(self, cookie: str | None) -> Session | None:
        """The session a cookie carries; None when absent, forged or expired."""
        body, _, sig = (cookie or "").partition(".")
        if not body or not hmac.compare_digest(sig, self._sign(body)):
            return None
        try:
            key_id, csrf, issued = json.loads(
                base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            )
        except ValueError:
            return None
        if time.time() - issued > MAX_AGE_S or str(csrf) in self._ended:
            return None
        return Session(str(key_id), str(csrf), int(issued))

    def end(self, session: Session) -> None:
        """Sign-out: the session is refused from now on, whoever holds its cookie. Only
        signed-in sessions are remembered (a stranger's sessions cannot grow the list)."""
        if not session.key_id:
            return
        now = time.time()
        self._ended = {t: i for t, i in self._ended.items() if now - i <= MAX_AGE_S}
        self._ended[session.csrf] = session.issued

    def match(self, key: str) -> str | None:
        """The fingerprint of `key` when it is a configured key (compared in constant time)."""
        found = None
        for key_id, k in self._keys.items():
            if hmac.compare_digest(k.key.encode(), key.encode()):
                found = key_id
        return found

    def caller(self, session: Session | None) -> Caller | None:
        """Who a session is: a configured key, the anonymous caller, or nobody (sign in)."""
        if self.closed:
            return None
        if not self.sign_in_needed:
            return ANONYMOUS
        key = self._keys.get(session.key_id) if session and session.key_id else None
        return Caller(key.caller, key.collections) if key else None

    def _sign(self, body: str) -> str:
        return hmac.new(self._secret, body.encode(), hashlib.sha256).hexdigest()


def csrf_ok(session: Session | None, token: str | None) -> bool:
    """A state-changing request carries its session's CSRF token (a cross-site form cannot
    read it: the cookie is HttpOnly and SameSite=Strict, the pages same-origin only)."""
    if session is None or not token:
        return False
    return hmac.compare_digest(session.csrf.encode(), token.encode())
