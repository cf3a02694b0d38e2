"""Test databases on the suite's server: a fresh one per test, cloned from the migrated
template (tests/conftest.py makes the template and the `dsn` fixtures from these)."""

from __future__ import annotations

import itertools
import os

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

TEMPLATE_DB = "pgrag_test_template"
_counter = itertools.count()


def with_dbname(dsn: str, dbname: str) -> str:
    params = conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return make_conninfo(**params)


def admin(server_dsn: str) -> psycopg.Connection:
    return psycopg.connect(server_dsn, autocommit=True)


def create_database(server_dsn: str, template: str | None = TEMPLATE_DB) -> str:
    name = f"pgrag_t{os.getpid()}_{next(_counter)}"
    with admin(server_dsn) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        tmpl = f' TEMPLATE "{template}"' if template else ""
        conn.execute(f'CREATE DATABASE "{name}"{tmpl}')
    return with_dbname(server_dsn, name)


def drop_database(server_dsn: str, dsn: str) -> None:
    name = conninfo_to_dict(dsn)["dbname"]
    with admin(server_dsn) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
