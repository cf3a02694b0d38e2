"""Who is calling, and which collections they may read: set per request by the HTTP auth
layer, read by every transport and service (stdio and the CLI run as "local", with full
access). Context variables, so concurrent requests never see each other's identity."""

from __future__ import annotations

from contextvars import ContextVar

_scope: ContextVar[list[str] | None] = ContextVar("pgrag_scope", default=None)
_caller: ContextVar[str] = ContextVar("pgrag_caller", default="local")
_account: ContextVar[str] = ContextVar("pgrag_account", default="local")
_may_write: ContextVar[bool] = ContextVar("pgrag_may_write", default=True)


def current_scope() -> list[str] | None:
    """Collections the caller may read (None = all)."""
    return _scope.get()


def current_caller() -> str:
    """The caller's audit name: "local", "anonymous" or "key:<hash prefix>"."""
    return _caller.get()


def current_account() -> str:
    """Whom the current call's slow work is charged to (services/admission): the caller,
    or for an anonymous one its address."""
    return _account.get()


def set_identity(caller: str, scope: list[str] | None, account: str | None = None) -> None:
    """Name the caller of the current request, the collections it may read and (when not
    the caller itself) the account its slow work is charged to."""
    _caller.set(caller)
    _scope.set(scope)
    _account.set(account or caller)


def may_write() -> bool:
    """False for an OAuth token granted read access only (the server's own read-only
    rule applies on top)."""
    return _may_write.get()


def set_may_write(allowed: bool) -> None:
    _may_write.set(allowed)
