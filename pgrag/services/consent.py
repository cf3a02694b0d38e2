"""What the OAuth consent page reads beside the authorization decisions (services/oauth.py):
the collections an owner may grant, and whether a grant limited to some of them can be
enforced (row-level security's role, as for a collection-limited key)."""

from __future__ import annotations

from psycopg_pool import AsyncConnectionPool

from pgrag.db.scope import ensure_scoping_possible, scoped_connection
from pgrag.store.collections import list_collections


async def grantable(pool: AsyncConnectionPool, scope: list[str] | None) -> list[str]:
    """The names of the collections the owner (`scope`: what they may read) may grant."""
    async with scoped_connection(pool, scope) as conn:
        return [c.name for c in await list_collections(conn)]


async def require_scoping(pool: AsyncConnectionPool) -> None:
    """Refused (an error naming the fix) when collection-limited access cannot be enforced."""
    await ensure_scoping_possible(pool)
