"""The names callers are recorded under (audit rows, search log, OAuth grants' owners):
keyed hashes, never a plain digest of a secret. `key:<16 hex>` is HMAC-SHA256 of the API key
under a key derived from the database's own secret (pgrag.server_secret, shared by every
server process on that database), so a stored name confirms no offline guess of the key.

Names from before this rule (`key:` and 10 hex of an unsalted SHA-256) were rewritten to
`key:legacy` by migration 0029."""

from __future__ import annotations

import hashlib
import hmac

PURPOSE = b"pgrag caller names v1"
_key: bytes | None = None


def use_database_secret(secret: str) -> None:
    """Called once the server has read its database's secret (services/context.py)."""
    global _key
    _key = hmac.new(secret.encode(), PURPOSE, hashlib.sha256).digest()


def keyed(kind: str, secret: str) -> str:
    """`kind:` and 16 hex of the keyed hash of `secret` (an API key, an OAuth subject)."""
    if _key is None:
        raise RuntimeError("caller names need the database's secret: the server is starting")
    digest = hmac.new(_key, secret.encode(), hashlib.sha256).hexdigest()
    return f"{kind}:{digest[:16]}"
