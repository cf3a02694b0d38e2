"""pgrag next to a DBA's PostgreSQL 15 (tests/support/pg15.py): the owner migrates and
grants an application role; the app role, an ordinary login role without CREATE on the
database, ingests, searches in every mode, reindexes and serves collection-limited keys,
which a role with CREATEROLE enables after the first migration."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import psycopg
import pytest

from tests.support.kb_server import http_server
from tests.support.pg15 import Pg15, drop_scoped_role, one_line, pgrag_as
from tests.support.servers import free_port


@pytest.fixture
def database(pg15: Pg15) -> Iterator[str]:
    """A database owned by pgrag_owner, `vector` created by the DBA, no pgrag_scoped yet."""
    drop_scoped_role(pg15)
    name = pg15.create_database()
    yield name
    pg15.drop_database(name)
    drop_scoped_role(pg15)


def _folders(tmp: Path) -> dict[str, Path]:
    texts = {
        "alpha": {"zebra.md": "# Zebras\n\nZebras graze on the savanna grass in herds.\n"},
        "beta": {"okapi.md": "# Okapis\n\nOkapis hide deep in the rainforest of Congo.\n"},
    }
    out = {}
    for collection, files in texts.items():
        out[collection] = tmp / collection
        out[collection].mkdir()
        for name, text in files.items():
            (out[collection] / name).write_text(text, encoding="utf-8")
    return out


def _rest_search(base: str, key: str, query: str, mode: str) -> set[str]:
    r = httpx2.get(
        f"{base}/api/search",
        params={"q": query, "mode": mode, "limit": 10},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    return {h["path"].rsplit("/", 1)[-1] for h in r.json()["results"]}


def test_the_owner_migrates_and_the_app_role_does_the_work(
    pg15: Pg15, database: str, tmp_path: Path
) -> None:
    """One DBA's day: the owner migrates for the app role (no CREATEROLE: collection-limited
    keys stay refused, said in one line), the app role ingests and searches, a role with
    CREATEROLE enables the keys later, the app role serves them and reindexes."""
    owner, app = pg15.dsn("pgrag_owner", database), pg15.dsn("pgrag_app", database)
    done = pgrag_as(owner, "migrate", "--app-role", "pgrag_app")
    assert done.returncode == 0, done.stderr
    assert "granted pgrag_app what pgrag needs" in done.stdout
    assert "pgrag_scoped" in done.stderr and "CREATEROLE" in done.stderr, done.stderr
    for collection, folder in _folders(tmp_path).items():
        ingested = pgrag_as(app, "ingest", "-q", "-c", collection, str(folder))
        assert ingested.returncode == 0, ingested.stderr
    found = pgrag_as(app, "search", "Zebra[s]", "--mode", "regex", "--json")
    assert found.returncode == 0 and "zebra.md" in found.stdout, found
    keys = {"PGRAG_API_KEYS": "full-key,alpha-key=alpha"}
    port = str(free_port())
    refused = pgrag_as(app, "serve", "--transport", "http", "--port", port, env=keys)
    assert refused.returncode == 2, refused.stderr  # a configuration error, before serving
    line = one_line(refused)
    assert "pgrag_scoped" in line and "pgrag migrate --app-role pgrag_app" in line, line
    doctor = pgrag_as(app, "doctor", env=keys)
    assert doctor.returncode == 1
    assert any(
        "FAIL collection-limited keys" in x and "CREATEROLE" in x
        for x in doctor.stderr.splitlines()
    ), doctor.stderr
    # a DBA with CREATEROLE (who neither owns the schema nor may migrate it) enables them
    enabled = pgrag_as(pg15.dsn("pgrag_admin", database), "migrate", "--app-role", "pgrag_app")
    assert enabled.returncode == 0, enabled.stderr
    assert "pgrag_scoped ready" in enabled.stdout, enabled.stdout
    doctor = pgrag_as(app, "doctor", env=keys)
    assert doctor.returncode == 0, doctor.stderr
    assert "ok   collection-limited keys" in doctor.stderr, doctor.stderr
    with http_server(app, "--embedding-model", "hash/384", env=keys) as server:
        for mode in ("hybrid", "semantic", "keyword", "exact"):
            assert "zebra.md" in _rest_search(server.base, "full-key", "zebras savanna", mode)
        for key, expected in (("alpha-key", {"zebra.md"}), ("full-key", {"zebra.md", "okapi.md"})):
            assert _rest_search(server.base, key, "zebras okapis", "keyword") == expected, key
    again = pgrag_as(owner, "migrate", "--app-role", "pgrag_app")  # idempotent
    assert again.returncode == 0 and "applied" not in again.stdout, again
    reindexed = pgrag_as(
        app, "reindex", "--collection", "alpha", "--model", "hash/256", "--drop-old"
    )
    assert reindexed.returncode == 0, reindexed.stderr
    found = pgrag_as(
        app, "--embedding-model", "hash/256", "search", "zebras", "-c", "alpha", "--mode",
        "semantic", "--json",
    )  # fmt: skip
    assert found.returncode == 0 and "zebra.md" in found.stdout, found


def test_the_app_role_builds_the_index_after_a_large_backfill(
    pg15: Pg15, database: str, tmp_path: Path
) -> None:
    """The app role does not own pgrag.embeddings: a large backfill drops and builds the
    collection's vector index through the owner's functions (no CONCURRENTLY there)."""
    owner, app = pg15.dsn("pgrag_owner", database), pg15.dsn("pgrag_app", database)
    assert pgrag_as(owner, "migrate", "--app-role", "pgrag_app").returncode == 0
    with psycopg.connect(pg15.dsn(dbname=database), autocommit=True) as conn:
        conn.execute("CREATE TABLE tickets (id int PRIMARY KEY, body text)")
        conn.execute(
            "INSERT INTO tickets SELECT g, 'Printer error E' || g FROM generate_series(1, 150) g"
        )
        conn.execute("ALTER TABLE tickets OWNER TO pgrag_app")  # the app's own table
    (tmp_path / "faq.md").write_text("# FAQ\n\nRestart the spooler first.\n")
    assert pgrag_as(app, "ingest", "-q", str(tmp_path)).returncode == 0  # one vector
    index_sql = (
        "SELECT c.oid, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE c.relname = (SELECT 'embeddings_hnsw_' || active_set_id FROM pgrag.collections"
        " WHERE name = 'default')"
    )
    with psycopg.connect(owner) as conn:
        before = conn.execute(index_sql).fetchall()
    env = {"PGRAG_BACKFILL_INDEX_ROWS": "100"}
    added = pgrag_as(app, "source", "add", "tickets", "--text", "body", env=env)
    assert added.returncode == 0, added.stderr
    synced = pgrag_as(app, "source", "sync", env=env)
    assert synced.returncode == 0 and "150 written" in synced.stderr, synced.stderr
    with psycopg.connect(owner) as conn:
        after = conn.execute(index_sql).fetchall()
        vectors = conn.execute("SELECT count(*) FROM pgrag.embeddings").fetchone()
    # dropped before the 150 rows' vectors went in, built again after them
    assert len(before) == 1 and len(after) == 1 and after[0][0] != before[0][0], (before, after)
    assert after[0][1] and vectors == (151,)
    found = pgrag_as(app, "search", "Printer error E42", "--mode", "hybrid", "--json")
    assert found.returncode == 0 and '"id": 42' in found.stdout, found.stdout
