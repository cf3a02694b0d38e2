"""The `pgrag` command line. Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration
error, 128 + N stopped by signal N before finishing (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP;
`serve` exits 0: being stopped is how a server ends)."""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import NoReturn

import click

from pgrag.cli.app import cli
from pgrag.cli.signals import (
    ignore_stop_signals,
    install_stop_handlers,
    note_interrupted,
    stop_exit_code,
    stop_signal_name,
    was_stopped,
)
from pgrag.display import printable
from pgrag.errors import ConfigError, PgragError, setup_error
from pgrag.runtime import release_embedded

# commands register themselves on `cli` when imported
from pgrag.cli import (  # noqa: F401  isort: skip
    db_commands,
    eval_command,
    ingest_commands,
    reindex_command,
    search_commands,
    serve_command,
    source_commands,
)


def main(argv: list[str] | None = None) -> None:
    install_stop_handlers()
    try:
        _main(argv)
    except SystemExit as exc:
        code = exc.code
    finally:
        ignore_stop_signals()  # exiting: let atexit stop the embedded cluster undisturbed
    if was_stopped() and _threads_holding_exit():
        # stopped while a worker thread blocks in a read (serve over stdio: the stdin
        # reader): the interpreter would wait for it forever before running atexit
        release_embedded()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 1)
    sys.exit(code)


def _threads_holding_exit() -> bool:
    main_thread = threading.main_thread()
    return any(
        t is not main_thread and t.is_alive() and not t.daemon for t in threading.enumerate()
    )


def _main(argv: list[str] | None) -> None:
    try:
        rv = cli.main(args=argv, prog_name="pgrag", standalone_mode=False)
    except click.exceptions.Abort as exc:
        if isinstance(exc.__cause__, KeyboardInterrupt):  # click's wrapping of Ctrl-C
            _stopped()
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(2 if isinstance(exc, click.UsageError) else exc.exit_code)
    except ConfigError as exc:
        click.echo(f"pgrag: configuration error: {exc}", err=True)
        sys.exit(2)
    except PgragError as exc:
        click.echo(f"pgrag: {exc.code}: {printable(str(exc))}", err=True)  # names in it
        sys.exit(1)
    except KeyboardInterrupt:
        _stopped()
    except Exception as exc:  # never a trace for the user; the log has it at DEBUG
        if (setup := setup_error(exc)) is not None:  # a privilege the database refused
            click.echo(f"pgrag: {setup.code}: {setup}", err=True)
            sys.exit(1)
        logging.getLogger("pgrag").debug("unexpected error", exc_info=True)
        click.echo(f"pgrag: INTERNAL: {type(exc).__name__}: {printable(str(exc))}", err=True)
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)


def _stopped() -> NoReturn:
    note_interrupted()
    click.echo(f"pgrag: stopped by {stop_signal_name()} before finishing", err=True)
    sys.exit(stop_exit_code())
