"""Stable error codes shared by the CLI, MCP tools and REST API: an agent branches on the
code, never on the message."""

from __future__ import annotations

import logging
import uuid
from enum import StrEnum
from typing import Annotated, Any

import psycopg
from psycopg_pool import PoolTimeout
from pydantic import BaseModel, Field, WithJsonSchema

log = logging.getLogger(__name__)


class ErrorCode(StrEnum):
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    FORBIDDEN = "FORBIDDEN"
    INVALID_HOST = "INVALID_HOST"  # a Host header the server does not answer for (421)
    PROCESSING = "PROCESSING"
    CONTENT_UNAVAILABLE = "CONTENT_UNAVAILABLE"
    DB_ERROR = "DB_ERROR"
    # the database needs an operator: a version, privilege, role or schema version it lacks
    # (the message names who runs what); permanent, never worth a retry
    DB_SETUP = "DB_SETUP"
    UPSTREAM_ERROR = "UPSTREAM_ERROR"
    TIMEOUT = "TIMEOUT"
    RATE_LIMITED = "RATE_LIMITED"  # the caller's share of slow work is spent (429)
    INTERNAL = "INTERNAL"
    # files an ingestion run refuses or gives up on (a document's error_code)
    SYMLINK_OUTSIDE_ROOT = "SYMLINK_OUTSIDE_ROOT"
    SYMLINK_NOT_FOLLOWED = "SYMLINK_NOT_FOLLOWED"
    NOT_REGULAR_FILE = "NOT_REGULAR_FILE"
    TOO_LARGE = "TOO_LARGE"  # or expands beyond a bound of ingest/parsers/limits.py
    PARSER_CRASHED = "PARSER_CRASHED"
    IO_ERROR = "IO_ERROR"  # the file could not be opened or hashed
    # PGRAG_HOME or a folder in it can be written by another user (home.py): not started
    UNSAFE_PERMISSIONS = "UNSAFE_PERMISSIONS"
    INTERRUPTED = "INTERRUPTED"  # the process writing its version died (store/interrupted.py)
    # files a parser cannot read (ParseError)
    CORRUPT_FILE = "CORRUPT_FILE"
    UNSUPPORTED_FORMAT = "UNSUPPORTED_FORMAT"
    EMPTY_FILE = "EMPTY_FILE"
    ENCODING_ERROR = "ENCODING_ERROR"
    ENCRYPTED = "ENCRYPTED"  # password-protected file we cannot open with an empty password
    UNREADABLE = "UNREADABLE"  # the OS refused to read it (permissions, vanished, a directory)
    OCR_UNAVAILABLE = "OCR_UNAVAILABLE"  # scanned pages or an image, and no OCR engine


# A failure as every transport reports it (MCP's envelope `error`, REST's body under its own
# field names): the code to branch on, what to do, and the facts behind it. No docstring and
# the code's schema a plain string: both would be repeated in the output schema of every tool.
class ErrorBody(BaseModel):
    code: Annotated[ErrorCode, WithJsonSchema({"type": "string", "title": "Code"})]
    message: str
    detail: dict[str, Any] = Field(default_factory=dict)


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

    def body(self) -> ErrorBody:
        return ErrorBody(code=self.code, message=self.message, detail=self.detail)


class InvalidArgument(PgragError):
    code = ErrorCode.INVALID_ARGUMENT


class NotFound(PgragError):
    code = ErrorCode.NOT_FOUND


class Forbidden(PgragError):
    code = ErrorCode.FORBIDDEN


class DatabaseError(PgragError):
    code = ErrorCode.DB_ERROR


class DatabaseSetupError(PgragError):
    """The server, a role's privileges or the schema need an operator's fix (named in the
    message): retrying cannot help."""

    code = ErrorCode.DB_SETUP


class BudgetExceeded(PgragError):
    """The call's own work passed the budget the server gives such work (a regex past
    PGRAG_REGEX_TIMEOUT_MS): cut, not finished, whatever the load. Admission charges it."""

    code = ErrorCode.TIMEOUT


class UpstreamError(PgragError):
    code = ErrorCode.UPSTREAM_ERROR


class ConfigError(PgragError):
    """Bad configuration: reported as one line at start-up."""

    code = ErrorCode.INVALID_ARGUMENT


def new_trace_id() -> str:
    """A short id that ties an answer to its lines in the server log."""
    return uuid.uuid4().hex[:16]


def internal_error(trace_id: str) -> PgragError:
    return PgragError(
        f"internal error (trace {trace_id}); the server log has the details",
        code=ErrorCode.INTERNAL,
    )


def as_pgrag_error(exc: BaseException, trace_id: str) -> PgragError:
    """Any failure of a call as a stable code: ours as they are, timeouts, a busy pool and
    database errors mapped, anything else INTERNAL (logged with its trace id). Shared by
    the MCP tool wrapper, MCP resources and the REST error handler."""
    if isinstance(exc, PgragError):
        return exc
    if isinstance(exc, TimeoutError):
        return PgragError(
            "the call took too long: narrow it (filters, smaller ranges) and retry",
            code=ErrorCode.TIMEOUT,
        )
    if isinstance(exc, PoolTimeout):
        return PgragError(
            "the server is busy (no database connection free): retry in a moment",
            code=ErrorCode.TIMEOUT,
        )
    if isinstance(exc, psycopg.DataError):  # e.g. a NUL byte or a malformed id in an argument
        return InvalidArgument(f"an argument cannot be used: {str(exc).splitlines()[0][:200]}")
    if isinstance(exc, psycopg.OperationalError):
        log.warning(
            "database unavailable (trace %s): %s %s",
            trace_id,
            getattr(exc, "sqlstate", None) or "-",
            str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__,
        )
        return DatabaseError(
            "the database is unavailable: retry in a few seconds", detail={"retry_after_s": 5}
        )
    if (setup := setup_error(exc)) is not None:
        log.warning("database set-up (trace %s): %s", trace_id, setup.message)
        return setup
    if isinstance(exc, psycopg.Error):
        log.exception("database error (trace %s)", trace_id)
        return DatabaseError(f"database error (trace {trace_id}); retry, or check the server log")
    log.exception("unexpected error (trace %s)", trace_id)
    return internal_error(trace_id)


# the role this process works as (pgrag.db.database.prepare sets it): named in the fixes
DATABASE_ROLE: list[str | None] = [None]


# what a DBA must do when the database refuses pgrag's role something (SQLSTATE class 42501)
PRIVILEGE_FIX = (
    "the schema's owner (or a DBA) runs `pgrag migrate --app-role {role}` to grant what pgrag "
    "needs (docs/existing-postgresql.md)"
)


def setup_error(exc: BaseException) -> DatabaseSetupError | None:
    """A database error only an operator can fix, as one line naming the fix; None for
    anything else. Privileges are the case: a role pgrag was not granted what it uses."""
    if not isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return None
    reason = (exc.diag.message_primary or str(exc)).splitlines()[0][:200]
    role = DATABASE_ROLE[0] or "<pgrag's role>"
    return DatabaseSetupError(
        f"the database refused role {role}: {reason}; " + PRIVILEGE_FIX.format(role=role),
        detail={"sqlstate": exc.sqlstate, "role": role},
    )
