"""The `pgrag` command line. Exit codes: 0 ok, 1 runtime failure, 2 usage error."""

from __future__ import annotations

import logging
import sys

import click

from pgrag.cli.app import cli
from pgrag.errors import ConfigError, PgragError

# commands register themselves on `cli` when imported
from pgrag.cli import (  # noqa: F401  isort: skip
    db_commands,
    eval_command,
    ingest_commands,
    reindex_command,
    search_commands,
    serve_command,
)


def main(argv: list[str] | None = None) -> None:
    try:
        rv = cli.main(args=argv, prog_name="pgrag", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if isinstance(exc, click.UsageError) else exc.exit_code)
    except ConfigError as exc:
        click.echo(f"pgrag: configuration error: {exc}", err=True)
        sys.exit(2)
    except PgragError as exc:
        click.echo(f"pgrag: {exc.code}: {exc}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # never a trace for the user; the log has it at DEBUG
        logging.getLogger("pgrag").debug("unexpected error", exc_info=True)
        click.echo(f"pgrag: INTERNAL: {type(exc).__name__}: {exc}", err=True)
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)
