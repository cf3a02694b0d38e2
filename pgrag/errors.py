"""Stable error codes shared by the CLI, MCP tools and REST API (SPEC §5.1)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    FORBIDDEN = "FORBIDDEN"
    PROCESSING = "PROCESSING"
    CONTENT_UNAVAILABLE = "CONTENT_UNAVAILABLE"
    DB_ERROR = "DB_ERROR"
    UPSTREAM_ERROR = "UPSTREAM_ERROR"
    TIMEOUT = "TIMEOUT"
    INTERNAL = "INTERNAL"


class PgragError(Exception):
    """An error an agent or operator can act on: a stable code plus what to do next."""

    code: ErrorCode = ErrorCode.INTERNAL

    def __init__(
        self, message: str, *, code: ErrorCode | None = None, detail: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.detail = detail or {}

    def to_dict(self) -> dict[str, Any]:
        return {"code": str(self.code), "message": self.message, "detail": self.detail}


class InvalidArgument(PgragError):
    code = ErrorCode.INVALID_ARGUMENT


class NotFound(PgragError):
    code = ErrorCode.NOT_FOUND


class Forbidden(PgragError):
    code = ErrorCode.FORBIDDEN


class DatabaseError(PgragError):
    code = ErrorCode.DB_ERROR


class UpstreamError(PgragError):
    code = ErrorCode.UPSTREAM_ERROR


class ConfigError(PgragError):
    """Bad configuration: reported as one line at start-up."""

    code = ErrorCode.INVALID_ARGUMENT
