"""Who is calling, and which collections they may read (set per request by the HTTP layer;
stdio and the CLI run with full access)."""

from __future__ import annotations

from contextvars import ContextVar

_scope: ContextVar[list[str] | None] = ContextVar("pgrag_scope", default=None)
_caller: ContextVar[str] = ContextVar("pgrag_caller", default="local")


def current_scope() -> list[str] | None:
    return _scope.get()


def current_caller() -> str:
    return _caller.get()


def set_identity(caller: str, scope: list[str] | None) -> None:
    _caller.set(caller)
    _scope.set(scope)
