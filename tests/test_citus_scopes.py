"""Collection scopes on a real local Citus cluster (a coordinator and two workers,
tests/support/citus.py; docs/scale-out.md "Collection scopes").

A collection-limited API key keeps the single-server guarantee on the cluster: the request
runs as the role pgrag_scoped, and the row-security policies of the shards, on the
workers, hide every other collection, so a query without any WHERE still cannot read it.
What makes that work, and what is proven here:

- `PGRAG_DISTRIBUTED=true pgrag migrate` gives pgrag_scoped LOGIN (the coordinator
  connects to the workers as the current role); the policies' function, the same as on a
  single server (migration 0019), reads the scope's collection ids from a setting, not a
  table (a worker cannot run a distributed query inside a shard query);
- pgrag.enter_scope and pgrag.set_local issue SET LOCAL statements, which Citus passes to
  the workers (`citus.propagate_set_commands = 'local'`): the scope, and the semantic
  leg's hnsw.ef_search, read on the worker side below;
- the whole scope-leak matrix (tests/test_scope_leaks.py, its core, compat and writable
  deployments: every search mode, explain, document reads by id, path and file name,
  listings, counts, continuation tokens, resources, REST, the compat, graph and write
  toolsets, uploads and deletes) runs against `pgrag serve` on the cluster, every
  collection hash-embedded;
- with password authentication on the workers, the one-time DBA step the docs give (a
  password for pgrag_scoped and a pg_dist_authinfo row) is what makes scoped keys work.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import tests.support.scope_leaks as leaks
import tests.support.scope_leaks_checks as checks
import tests.support.scope_leaks_probes as probes
from pgrag.db.database import open_database
from pgrag.db.scope import (
    SCOPING_IMPOSSIBLE_ON_CLUSTER,
    check_scoping_possible,
    scoped_connection,
)
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.errors import ConfigError
from pgrag.ingest.pipeline import Ingestor
from pgrag.services.status import status_report
from pgrag.settings import load_settings
from pgrag.store.compat import ready_documents
from tests.support.citus import CitusCluster, fresh_database
from tests.support.commands import pgrag_cmd
from tests.support.kb_server import (
    API_KEYS,
    BULK_COLLECTION,
    FULL_KEY,
    HASH_MODEL,
    KB_COLLECTION,
    OTHER_COLLECTION,
    SCOPED_KEY,
    _build_trees,
    child_env,
    http_server,
)
from tests.support.scope_leaks_core import DOCUMENT_READS

pytestmark = pytest.mark.anyio

TABLES = ("collections", "embedding_sets", "documents", "units", "sheet_rows", "chunks")
TABLES += ("embeddings", "language_sums")
SMALL = {  # collection -> file -> text (a sheet too: units and sheet rows)
    "alpha": {
        "alpha.md": "# Alpha\n\nalpha secret about zebras\n",
        "alpha.csv": "k,v\nzebra,1\n",
    },
    "beta": {"beta.md": "# Beta\n\nbeta secret about zebras\n", "beta.csv": "k,v\nzebra,2\n"},
}
NOTES = 150  # more chunks in one collection than the default hnsw.ef_search (40)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # module scope: the server and clients below live for the module


def _migrate(url: str) -> None:
    """`PGRAG_DISTRIBUTED=true pgrag migrate`, as a user runs it."""
    proc = subprocess.run(
        pgrag_cmd("--database-url", url, "migrate"),
        env=child_env(PGRAG_DISTRIBUTED="true"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


async def _ingest(url: str, root: Path, files: dict[str, dict[str, str]]) -> None:
    for collection, texts in files.items():
        for rel, text in texts.items():
            (root / collection / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / collection / rel).write_text(text, encoding="utf-8")
        async with open_database(load_settings(), dsn=url, max_size=2) as db:
            summary = await Ingestor(db.pool, HashEmbedder("hash/64"), collection=collection).run(
                [root / collection]
            )
            assert not summary.failures, summary.failures


@pytest.fixture(scope="module")
def small(citus: CitusCluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """alpha and beta (two files each) and `many` (NOTES notes), distributed by migrate."""
    url = fresh_database(citus)
    _migrate(url)
    notes = {
        f"n{i:03d}.md": f"# Note {i}\n\nnote {i} on topic {i % 13}, item {i * 7}\n"
        for i in range(NOTES)
    }
    asyncio.run(_ingest(url, tmp_path_factory.mktemp("small"), {**SMALL, "many": notes}))
    return url


def _ids(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT name, id FROM pgrag.collections").fetchall())


async def _counts(url: str, scope: list[str] | None) -> dict[str, int]:
    """Rows of every table through pgrag's scoped connection, with no WHERE at all."""
    out = {}
    async with (
        open_database(load_settings(), dsn=url, max_size=1) as db,
        scoped_connection(db.pool, scope) as conn,
    ):
        for t in TABLES:
            row = await (await conn.execute(f"SELECT count(*) FROM pgrag.{t}")).fetchone()
            out[t] = row[0] if row else -1
    return out


def test_migrate_lets_the_scoped_role_log_in_on_every_node(citus: CitusCluster, small: str) -> None:
    dbname = small.rsplit("/", 1)[-1]
    for port in citus.ports:
        with psycopg.connect(citus.dsn(dbname, port)) as conn:
            row = conn.execute(
                "SELECT rolcanlogin FROM pg_roles WHERE rolname = 'pgrag_scoped'"
            ).fetchone()
            assert row == (True,), port
    with psycopg.connect(small) as conn:
        body = conn.execute(
            "SELECT prosrc FROM pg_proc WHERE oid = 'pgrag.collection_in_scope'::regproc"
        ).fetchone()
    assert body and "pgrag.scope_ids" in body[0] and "pgrag.collections" not in body[0]


async def test_a_scope_hides_other_collections_without_any_where(small: str) -> None:
    everything = await _counts(small, None)
    alpha = await _counts(small, ["alpha"])
    both = await _counts(small, ["alpha", "beta"])
    nothing = await _counts(small, ["no-such-collection"])
    assert everything["documents"] == 4 + NOTES
    assert alpha["documents"] == 2 and both["documents"] == 4
    assert all(alpha[t] > 0 for t in TABLES), alpha
    assert all(alpha[t] < both[t] for t in TABLES if t != "language_sums"), (alpha, both)
    assert all(both[t] < everything[t] for t in ("documents", "chunks", "embeddings"))
    assert all(v == 0 for v in nothing.values()), nothing
    async with (
        open_database(load_settings(), dsn=small, max_size=1) as db,
        scoped_connection(db.pool, ["alpha"]) as conn,
    ):
        texts = [
            r[0] for r in await (await conn.execute("SELECT content FROM pgrag.chunks")).fetchall()
        ]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            await conn.execute("DELETE FROM pgrag.documents")
    assert texts and not any("beta" in t or "note" in t for t in texts), texts


OLD_COLLECTIONS_POLICY = (  # migration 0011's, by names: what a cluster had before 0019
    "ALTER POLICY scoped ON pgrag.collections USING"
    " (name = ANY (string_to_array(nullif(current_setting('pgrag.scope', true), ''), '|')))"
)
POLICY_QUALS_SQL = (  # the `scoped` policies (0028's `unscoped` ones are not the scope's)
    "SELECT DISTINCT qual FROM pg_policies WHERE schemaname = 'pgrag'"
    " AND policyname = 'scoped' AND tablename ~ '^collections(_[0-9]+)?$'"
)


async def test_migration_0019_reaches_the_shards_of_a_distributed_database(
    citus: CitusCluster, small: str
) -> None:
    """A cluster distributed before migration 0019 (pgrag.collections' policy by names) gets
    the policy by ids on every node's copy of the reference table when it migrates, and
    the scope works as before."""
    dbname = small.rsplit("/", 1)[-1]
    try:
        with psycopg.connect(small, autocommit=True) as conn:
            conn.execute(OLD_COLLECTIONS_POLICY)
            conn.execute("DELETE FROM pgrag.schema_migrations WHERE version = 19")
        for port in citus.ports:
            with psycopg.connect(citus.dsn(dbname, port)) as conn:
                quals = [r[0] for r in conn.execute(POLICY_QUALS_SQL).fetchall()]
            assert quals and all("pgrag.scope'" in q for q in quals), (port, quals)
    finally:
        _migrate(small)
    for port in citus.ports:
        with psycopg.connect(citus.dsn(dbname, port)) as conn:
            quals = [r[0] for r in conn.execute(POLICY_QUALS_SQL).fetchall()]
        assert quals == ["pgrag.collection_in_scope(id)"], (port, quals)
    alpha = await _counts(small, ["alpha"])
    assert alpha["collections"] == 1 and alpha["documents"] == 2, alpha


async def test_a_documents_chunk_count_names_its_collection(small: str) -> None:
    """`pgrag status <document>` and the rag toolset's listing count a document's chunks
    in a subquery, which Citus runs only when it names the collection too (a correlated
    subquery between distributed tables not joined on the distribution column is refused)."""
    async with await psycopg.AsyncConnection.connect(small) as conn:
        one = await status_report(conn, "alpha.md")
        listed, total = await ready_documents(conn, ["alpha"], 0, 10)
    assert one["path"] == "alpha.md" and one["chunks"] > 0, one
    assert total == 2 and sorted(d.name for d in listed) == ["alpha.csv", "alpha.md"]
    assert all(d.chunk_count > 0 for d in listed), listed


def test_the_shards_themselves_enforce_the_scope(citus: CitusCluster, small: str) -> None:
    """On a worker, as pgrag_scoped, the shard tables' own row security: no scope, no rows;
    alpha's ids, alpha's rows only, whichever shard is read."""
    ids = _ids(small)
    dbname = small.rsplit("/", 1)[-1]
    with psycopg.connect(small) as conn:
        shards = conn.execute(
            "SELECT shard_name, nodename, nodeport FROM citus_shards"
            " WHERE table_name = 'pgrag.documents'::regclass"
        ).fetchall()
    seen: dict[str, int] = {}
    for shard, _, port in shards:
        url = f"postgresql://pgrag_scoped@127.0.0.1:{port}/{dbname}"
        with psycopg.connect(url, autocommit=True) as conn:
            table = sql.SQL("pgrag.{}").format(sql.Identifier(shard.split(".", 1)[1]))
            count = sql.SQL("SELECT count(*) FROM {}").format(table)
            assert conn.execute(count).fetchone() == (0,), shard  # no scope set
            conn.execute("SELECT set_config('pgrag.scope_ids', %s, false)", (str(ids["alpha"]),))
            for (cid,) in conn.execute(
                sql.SQL("SELECT collection_id FROM {}").format(table)
            ).fetchall():
                seen[shard] = cid
    assert set(seen.values()) == {ids["alpha"]}, seen  # alpha's shard found, nothing else


def test_settings_reach_the_workers_through_a_distributed_query(small: str) -> None:
    """The scope and hnsw.ef_search set by pgrag's functions are what the worker sees when
    it evaluates the query; a plain set_config() on the coordinator is not (the control)."""
    ids = _ids(small)
    probe = (
        "SELECT DISTINCT current_setting('pgrag.scope_ids', true),"
        " current_setting('hnsw.ef_search', true), current_setting('pgrag.probe', true)"
        " FROM pgrag.{} WHERE collection_id = %s"
    )
    with psycopg.connect(small) as conn:
        conn.execute("SELECT set_config('pgrag.probe', 'coordinator only', true)")
        conn.execute("SELECT pgrag.set_local('hnsw.ef_search', '77')")
        conn.execute("SELECT pgrag.enter_scope('alpha|beta')")
        rows = {
            t: conn.execute(probe.format(t).encode(), (ids["beta"],)).fetchall()
            for t in ("documents", "chunks", "embeddings")
        }
        coordinator = conn.execute(
            "SELECT current_setting('pgrag.scope_ids'), current_setting('pgrag.probe')"
        ).fetchone()
    scope_ids = f"{min(ids['alpha'], ids['beta'])}|{max(ids['alpha'], ids['beta'])}"
    assert all(r == [(scope_ids, "77", None)] for r in rows.values()), rows
    assert coordinator == (scope_ids, "coordinator only")


def _leg(url: str) -> str:
    """The semantic leg of `many` with a literal query vector (EXPLAIN-able on the cluster)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT pgrag.semantic_leg_sql(es.id, es.dimensions, false, false, es.collection_id),"
            " es.collection_id"
            " FROM pgrag.collections c JOIN pgrag.embedding_sets es ON es.id = c.active_set_id"
            " WHERE c.name = 'many'"
        ).fetchone()
        assert row
        leg, cid = row
        vector = conn.execute(
            "SELECT embedding::text FROM pgrag.embeddings WHERE collection_id = %s LIMIT 1",
            (cid,),
        ).fetchone()
    assert vector
    return str(leg.replace("$1", f"'{vector[0]}'").replace("$2", "'{}'").replace("$3", "100"))


SET_EF_SEARCH = {
    "pgrag.set_local": "SELECT pgrag.set_local('hnsw.ef_search', '100')",
    "set_config": "SELECT set_config('hnsw.ef_search', '100', true)",
}


@pytest.mark.parametrize(("how", "rows"), [("pgrag.set_local", 100), ("set_config", 40)])
def test_the_shards_hnsw_scan_uses_the_ef_search_pgrag_sets(
    small: str, how: str, rows: int
) -> None:
    """A routed HNSW scan for 100 neighbours returns 100 rows when hnsw.ef_search = 100
    reached the worker (pgrag.semantic_candidates sets it with pgrag.set_local), and the
    worker's default 40 when it did not (set_config, which Citus does not pass on)."""
    leg = _leg(small)
    with psycopg.connect(small) as conn:
        conn.execute("SELECT pgrag.set_local('enable_seqscan', 'off')")  # the HNSW index,
        conn.execute("SELECT pgrag.set_local('enable_sort', 'off')")  # as at scale
        conn.execute(SET_EF_SEARCH[how])
        plan = "\n".join(r[0] for r in conn.execute(f"EXPLAIN (COSTS OFF) {leg}").fetchall())
        got = conn.execute(leg.encode()).fetchall()
    assert "Task Count: 1" in plan and "Index Scan using embeddings_hnsw_" in plan, plan
    assert len(got) == rows


async def test_scoped_semantic_candidates_fill_the_pool(small: str) -> None:
    """The whole semantic leg under a scope: the pool it asks the shard for comes back."""
    async with (
        open_database(load_settings(), dsn=small, max_size=1) as db,
        scoped_connection(db.pool, ["many"]) as conn,
    ):
        await conn.execute("SELECT pgrag.set_local('enable_seqscan', 'off')")
        await conn.execute("SELECT pgrag.set_local('enable_sort', 'off')")
        vector = await HashEmbedder("hash/64").embed_query("note on topic 3")
        cur = await conn.execute(
            "SELECT count(*), count(DISTINCT c.collection_id)"
            " FROM pgrag.semantic_candidates(%s::vector, 100) s"
            " JOIN pgrag.chunks c ON c.id = s.chunk_id",
            (str([float(x) for x in vector]),),
        )
        row = await cur.fetchone()
    assert row == (100, 1)


async def test_serving_refuses_scoped_keys_when_the_role_cannot_log_in(small: str) -> None:
    """Without LOGIN every scoped request would fail on the workers: `pgrag serve` with
    scoped keys refuses to start instead, and a migrate puts LOGIN back."""
    with psycopg.connect(small, autocommit=True) as conn:
        conn.execute("ALTER ROLE pgrag_scoped NOLOGIN")
    try:
        async with await psycopg.AsyncConnection.connect(small) as conn:
            with pytest.raises(ConfigError) as exc:
                await check_scoping_possible(conn)
        assert str(exc.value) == SCOPING_IMPOSSIBLE_ON_CLUSTER
    finally:
        _migrate(small)  # gives the role LOGIN back
    with psycopg.connect(small) as conn:
        row = conn.execute("SELECT rolcanlogin FROM pg_roles WHERE rolname = 'pgrag_scoped'")
        assert row.fetchone() == (True,)


SECRET = "scoped-test-secret"  # a password for this test only


@contextlib.contextmanager
def _password_authentication(citus: CitusCluster, dbname: str) -> Iterator[None]:
    """The workers ask pgrag_scoped for a password (scram-sha-256) on `dbname`, as a real
    cluster's pg_hba.conf does; put back afterwards."""
    files = [citus.base / f"worker{i + 1}" / "pg_hba.conf" for i in range(len(citus.worker_ports))]
    saved = [f.read_text() for f in files]
    rule = f"host {dbname} pgrag_scoped 127.0.0.1/32 scram-sha-256\n"

    def reload() -> None:
        for port in citus.worker_ports:
            with psycopg.connect(citus.dsn(port=port), autocommit=True) as conn:
                conn.execute("SELECT pg_reload_conf()")

    try:
        for f, text in zip(files, saved, strict=True):
            f.write_text(rule + text)
        reload()
        yield
    finally:
        for f, text in zip(files, saved, strict=True):
            f.write_text(text)
        reload()


async def test_password_authentication_needs_the_documented_dba_step(
    citus: CitusCluster, tmp_path: Path
) -> None:
    """docs/scale-out.md: with password authentication on the workers a scoped request
    fails until pgrag_scoped has a password and pg_dist_authinfo gives it to the
    coordinator; then the scope works as before."""
    url = fresh_database(citus)
    _migrate(url)
    await _ingest(url, tmp_path, SMALL)
    dbname = url.rsplit("/", 1)[-1]
    try:
        with _password_authentication(citus, dbname):
            with pytest.raises(psycopg.OperationalError, match="pgrag_scoped"):
                await _counts(url, ["alpha"])
            with psycopg.connect(url, autocommit=True) as conn:  # the DBA step
                conn.execute(
                    sql.SQL("ALTER ROLE pgrag_scoped PASSWORD {}").format(sql.Literal(SECRET))
                )
                conn.execute(
                    "INSERT INTO pg_dist_authinfo (nodeid, rolename, authinfo)"
                    " VALUES (0, 'pgrag_scoped', %s)",
                    (f"password={SECRET}",),
                )
            counts = await _counts(url, ["alpha"])
            assert counts["documents"] == 2 and counts["chunks"] > 0, counts
            assert (await _counts(url, ["beta", "alpha"]))["documents"] == 4
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DELETE FROM pg_dist_authinfo WHERE rolename = 'pgrag_scoped'")
            conn.execute("ALTER ROLE pgrag_scoped PASSWORD NULL")


# ------------------------------------------------------- the scope-leak matrix, on the cluster


@pytest.fixture(scope="module")
def cluster_kb(citus: CitusCluster, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The scope-leak knowledge base (kb, bulk, other) on the cluster, every collection
    embedded with hash/384."""
    url = fresh_database(citus)
    _migrate(url)
    kb_tree, bulk, other = _build_trees(tmp_path_factory.mktemp("citus-kb"))
    ingest = pgrag_cmd("--database-url", url, "--embedding-model", HASH_MODEL, "ingest", "-q")
    for collection, tree in ((KB_COLLECTION, kb_tree), (BULK_COLLECTION, bulk)):
        done = subprocess.run(
            [*ingest, "-c", collection, str(tree)],
            capture_output=True,
            text=True,
            timeout=900,
            env=child_env(),
        )
        assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run(
        [*ingest, "-c", OTHER_COLLECTION, str(other)],
        capture_output=True,
        text=True,
        timeout=300,
        env=child_env(),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return url


@pytest.fixture(scope="module")
async def core(cluster_kb: str) -> AsyncIterator[probes.Deployment]:
    """`pgrag serve` on the cluster, core toolset, read-only, as the matrix's `core`."""
    w = leaks.world_of(cluster_kb, leaks.KB_ROLES)
    flags = ("--embedding-model", HASH_MODEL, "--api-keys", API_KEYS)
    with http_server(cluster_kb, *flags) as server:
        keys = {"full": FULL_KEY, "scoped": SCOPED_KEY}
        async with probes.connected(server, keys) as (clients, rests):
            await probes.mint_tokens(w, clients["full"], rests["full"])
            yield probes.Deployment("core", server, w, clients, rests)


@pytest.fixture(scope="module")
async def compat(cluster_kb: str) -> AsyncIterator[probes.Deployment]:
    """The same knowledge base behind the matrix's `compat` server (rag, ldims, graph,
    chart, web), graph rows linked to A's and B's documents on the coordinator."""
    async with probes.compat_deployment(cluster_kb, "--embedding-model", HASH_MODEL) as dep:
        yield dep


@pytest.fixture(scope="module")
async def writable(
    citus: CitusCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[probes.Deployment]:
    """The matrix's `writable` server (core, write, graph; PGRAG_READ_ONLY=false) on a
    distributed database of its own."""
    url = fresh_database(citus)
    _migrate(url)
    async with checks.writable_deployment(url, tmp_path_factory.mktemp("citus-writable")) as dep:
        yield dep


@pytest.fixture
def deployment(where: str, request: pytest.FixtureRequest) -> probes.Deployment:
    """The module's deployment of that name (a sync fixture: async ones cannot be looked
    up from inside a running test)."""
    return request.getfixturevalue(where)  # type: ignore[no-any-return]


# every case of the matrix, deployment by deployment (the order the single server runs them)
CASES = [
    (where, p) for name in leaks.DEPLOYMENT_TOOLSETS for where, p in probes.CASES if where == name
]


@pytest.mark.parametrize(("where", "probe"), CASES, ids=[f"{w}:{p.id}" for w, p in CASES])
async def test_probe_on_the_cluster(probe: leaks.Probe, deployment: probes.Deployment) -> None:
    await checks.check_probe(deployment, probe)


@pytest.mark.parametrize("where", list(leaks.DEPLOYMENT_TOOLSETS))
async def test_every_tool_resource_and_route_on_the_cluster_is_probed(
    where: str, deployment: probes.Deployment
) -> None:
    await checks.check_coverage(where, deployment)


def test_the_matrix_on_the_cluster_covers_every_case_search_mode_and_read() -> None:
    """What runs above: every case of every deployment of the single server's matrix,
    every search mode (with explain), every document read."""
    assert sorted(CASES, key=repr) == sorted(probes.CASES, key=repr)
    assert {where for where, _ in CASES} == set(leaks.DEPLOYMENT_TOOLSETS)
    core = [p for where, p in CASES if where == "core"]
    modes = {p.args.get("mode") for p in core if p.target == "search"}
    assert {"keyword", "exact", "regex", "semantic", "hybrid"} <= modes
    assert any(p.args.get("explain") for p in core if p.target == "search")
    reads = {name for name, _, _ in DOCUMENT_READS}
    assert reads <= {p.target for p in core}
    rest = {p.target for p in core if p.kind == "rest"}
    assert {probes.SEARCH_ROUTE, probes.DOC_ROUTE, probes.CONTENT_ROUTE} <= rest
