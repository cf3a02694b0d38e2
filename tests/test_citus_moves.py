"""Operations on a real Citus cluster (docs/scale-out.md, "Operations"): a tenant isolated
to its own shard and moved to the other worker keeps its search results, its searches go
to the new node and ingestion into it goes on; and a logical export through the
coordinator (`pg_dump --data-only` into a single server that `pgrag migrate` prepared)
gives a single server with the same search results.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgrag.db.database import open_database
from pgrag.db.distributed import DISTRIBUTED_TABLES
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.services.graph import GraphService
from pgrag.settings import load_settings
from tests.support.citus import (
    CitusCluster,
    ingested_database,
    logged_search,
    three_collections,
)
from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database

PROVIDER = HashEmbedder("hash/384")
FOLDERS = three_collections(6)
SEARCHES: list[dict[str, Any]] = [
    {"query": q, "mode": mode, "limit": 10, "max_tokens": 25000, **scope}
    for q, mode in [
        ("contract signing legal review vacation", "hybrid"),
        ("contract signing legal review vacation", "keyword"),
        ("contract signing legal review vacation", "semantic"),
        ("legal review [0-9]", "regex"),
    ]
    for scope in ({"filters": {"collection": "alpha"}}, {})
] + [
    {
        "query": "vacation leave",
        "mode": "hybrid",
        "scope": "documents",
        "limit": 5,
        "max_tokens": 25000,
    }
]


@pytest.fixture(scope="module")
def cluster_db(citus: CitusCluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """Three collections ingested through pgrag into a database distributed by collection;
    (its url, the folders)."""
    tmp = tmp_path_factory.mktemp("moves")
    return ingested_database(citus, tmp, FOLDERS), tmp


async def _searches(dsn: str) -> list[list[tuple[str, int, float]]]:
    """Each of SEARCHES: (path, rank, score) per hit."""
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        service = SearchService(db.pool, PROVIDER, log_searches=False)
        out = []
        for kw in SEARCHES:
            page = await service.search(SearchRequest(**kw))
            out.append([(h.path, h.rank, round(h.score, 6)) for h in page.data.results])
    return out


# ---- a tenant moved to another worker ---------------------------------------------------------

SHARD_RE = re.compile(r"pgrag\.\"?[a-z][a-z0-9_]*_(\d{6,})\b")
PLACEMENTS_SQL = """
SELECT shardid, nodeport FROM citus_shards WHERE NOT shardid = ANY (%s::bigint[]) ORDER BY 1
"""


def _tenant_shards(conn: psycopg.Connection, collection_id: int) -> dict[int, set[int]]:
    """The collection's shard of every distributed table -> the ports of its placements."""
    out: dict[int, set[int]] = {}
    for table in DISTRIBUTED_TABLES:
        row = conn.execute(
            "SELECT get_shard_id_for_distribution_column(%s, %s)",
            (f"pgrag.{table}", collection_id),
        ).fetchone()
        assert row
        ports = conn.execute(
            "SELECT nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)"
            " WHERE p.shardid = %s",
            (row[0],),
        ).fetchall()
        out[row[0]] = {p for (p,) in ports}
    return out


def test_an_isolated_tenant_moved_to_another_worker_searches_and_ingests_there(
    citus: CitusCluster, cluster_db: tuple[str, Path]
) -> None:
    """isolate_tenant_to_new_shard, then citus_move_shard_placement of that shard (the
    co-located shards of every table move with it): the same results in every mode, every
    statement of a scoped search that names the tenant's shards goes to the new worker, the
    moved embeddings shard carries its HNSW index there, and a new file is ingested there."""
    url, tmp = cluster_db
    before = asyncio.run(_searches(url))
    assert all(before), before
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT id FROM pgrag.collections WHERE name = 'alpha'").fetchone()
        assert row
        alpha = row[0]
        conn.execute(
            "SELECT isolate_tenant_to_new_shard('pgrag.documents', %s, 'CASCADE',"
            " shard_transfer_mode => 'block_writes')",
            (alpha,),
        )
        shards = _tenant_shards(conn, alpha)
        (source,) = set.union(*shards.values())  # one placement, the same worker for all
        target = next(p for p in citus.worker_ports if p != source)
        documents_shard = next(iter(shards))
        others = conn.execute(PLACEMENTS_SQL, (list(shards),)).fetchall()
        conn.execute(
            "SELECT citus_move_shard_placement(%s, '127.0.0.1', %s, '127.0.0.1', %s,"
            " shard_transfer_mode => 'block_writes')",
            (documents_shard, source, target),
        )
        moved = _tenant_shards(conn, alpha)
        elsewhere = conn.execute(PLACEMENTS_SQL, (list(shards),)).fetchall()
    assert moved.keys() == shards.keys()  # the same shards...
    assert all(ports == {target} for ports in moved.values()), moved  # ...on the other worker
    assert elsewhere == others  # the other collections' shards stayed where they were
    # the moved embeddings shard has its HNSW index on the new worker
    emb_shard = list(moved)[DISTRIBUTED_TABLES.index("embeddings")]
    dbname = url.rsplit("/", 1)[1]
    with psycopg.connect(citus.dsn(dbname, target)) as worker:
        worker.execute("SET citus.override_table_visibility = off")  # shards hidden otherwise
        indexes = {
            r[0]
            for r in worker.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = %s",
                (f"embeddings_{emb_shard}",),
            ).fetchall()
        }
    assert any(i.startswith("embeddings_hnsw_") for i in indexes), indexes

    assert asyncio.run(_searches(url)) == before  # every mode, scoped and not

    for mode in ("hybrid", "semantic", "keyword"):
        req = SearchRequest(
            query="contract signing legal review", mode=mode, limit=5, max_tokens=25000,
            filters={"collection": "alpha"},
        )  # fmt: skip
        found, commands = asyncio.run(logged_search(url, req))
        assert found > 0
        to_tenant = [
            (cmd[:100], port)
            for cmd, port in commands
            if {int(m.group(1)) for m in SHARD_RE.finditer(cmd)} & moved.keys()
        ]
        assert to_tenant, commands
        assert {port for _, port in to_tenant} == {target}, to_tenant

    # ingestion into the moved tenant goes on, on the new worker
    (tmp / "alpha" / "new.md").write_text("# Zebrafinch\n\nThe zebrafinch contract annex.\n")

    async def ingest_and_find() -> list[str]:
        async with open_database(load_settings(), dsn=url, max_size=2) as db:
            summary = await Ingestor(db.pool, PROVIDER, collection="alpha").run([tmp / "alpha"])
            assert not summary.failures and summary.changed, summary
            page = await SearchService(db.pool, PROVIDER, log_searches=False).search(
                SearchRequest(query="zebrafinch", mode="hybrid", filters={"collection": "alpha"})
            )
        return [h.path for h in page.data.results]

    assert asyncio.run(ingest_and_find())[0] == "new.md"
    chunks_shard = list(moved)[DISTRIBUTED_TABLES.index("chunks")]
    with psycopg.connect(citus.dsn(dbname, target)) as worker:
        on_target = worker.execute(
            f"SELECT count(*) FROM pgrag.chunks_{chunks_shard} WHERE content LIKE '%%zebrafinch%%'"
        ).fetchone()
    assert on_target == (1,)


# ---- a worker drained, then filled again by the rebalancer ------------------------------------

PER_WORKER_SQL = """
SELECT nodeport, count(*) FROM citus_shards
WHERE citus_table_type = 'distributed' GROUP BY 1 ORDER BY 1
"""


def test_a_drained_worker_is_filled_again_by_the_rebalancer(
    citus: CitusCluster, cluster_db: tuple[str, Path]
) -> None:
    """With two workers, the operations of adding and removing one: `citus_drain_node`
    moves every shard off a worker, then that worker, empty like a new one, is filled by
    `citus_rebalance_start` + `citus_rebalance_wait`; searches in every mode give the same
    results at each step, and ingestion goes on after."""
    url, tmp = cluster_db
    before = asyncio.run(_searches(url))
    assert all(before), before
    drained = citus.worker_ports[1]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT citus_drain_node('127.0.0.1', %s, shard_transfer_mode => 'block_writes')",
            (drained,),
        )
        after_drain = dict(conn.execute(PER_WORKER_SQL).fetchall())
    assert drained not in after_drain and after_drain, after_drain
    assert asyncio.run(_searches(url)) == before
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT citus_set_node_property('127.0.0.1', %s, 'shouldhaveshards', true)",
            (drained,),
        )
        conn.execute("SELECT citus_rebalance_start(shard_transfer_mode => 'block_writes')")
        conn.execute("SELECT citus_rebalance_wait()")
        state = conn.execute(
            "SELECT state FROM pg_dist_background_job ORDER BY job_id DESC LIMIT 1"
        ).fetchone()
        rebalanced = dict(conn.execute(PER_WORKER_SQL).fetchall())
    assert state == ("finished",), state
    assert set(rebalanced) == set(citus.worker_ports), rebalanced  # shards on both again
    assert sum(rebalanced.values()) == sum(after_drain.values())
    assert asyncio.run(_searches(url)) == before

    (tmp / "beta" / "late.md").write_text("# Late\n\nA heron leave request, filed late.\n")

    async def ingest_and_find() -> list[str]:
        async with open_database(load_settings(), dsn=url, max_size=2) as db:
            summary = await Ingestor(db.pool, PROVIDER, collection="beta").run([tmp / "beta"])
            assert not summary.failures and summary.changed, summary
            page = await SearchService(db.pool, PROVIDER, log_searches=False).search(
                SearchRequest(query="heron", mode="hybrid", filters={"collection": "beta"})
            )
        return [h.path for h in page.data.results]

    assert asyncio.run(ingest_and_find())[:1] == ["late.md"]


# ---- a logical export back to one server ------------------------------------------------------

# pgrag's own bookkeeping, written by `pgrag migrate` on the target
NOT_EXPORTED = ("pgrag.schema_migrations", "pgrag.schema_functions")


def _tool(citus: CitusCluster, name: str) -> str:
    return str(citus.pginstall / "bin" / name)


def export_to_single_server(citus: CitusCluster, source: str, target: str) -> None:
    """docs/scale-out.md, "Back to one server": the steps as a user runs them."""
    env = {**os.environ, "LD_LIBRARY_PATH": str(citus.libs), "PGRAG_DISTRIBUTED": "false"}
    # 1. the single-server schema on the target
    subprocess.run([*pgrag_cmd("--database-url", target, "migrate")], check=True, env=env)
    # 2. its fresh secret out of the way (the cluster's comes with the data)
    subprocess.run(
        [_tool(citus, "psql"), "-v", "ON_ERROR_STOP=1", "-d", target, "-c",
         "TRUNCATE pgrag.server_secret"],
        check=True, env=env, capture_output=True,
    )  # fmt: skip
    # 3. every row of pgrag's tables, read through the coordinator, into the target
    dump = subprocess.run(
        [_tool(citus, "pg_dump"), "--data-only", "--schema=pgrag", "--disable-triggers",
         *(f"--exclude-table={t}" for t in NOT_EXPORTED), "-d", source],
        check=True, env=env, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        [_tool(citus, "psql"), "-v", "ON_ERROR_STOP=1", "--single-transaction", "-q", "-d",
         target],
        input=dump.stdout, check=True, env=env, capture_output=True,
    )  # fmt: skip
    # 4. graph links left dangling by an older pgrag on the cluster (the load checked no
    # foreign key), the HNSW index of each embedding set, statistics
    subprocess.run(
        [_tool(citus, "psql"), "-v", "ON_ERROR_STOP=1", "-d", target, "-c", UNDANGLE_SQL,
         "-c", "SELECT pgrag.ensure_embedding_index(id) FROM pgrag.embedding_sets",
         "-c", "ANALYZE"],
        check=True, env=env, capture_output=True,
    )  # fmt: skip


UNDANGLE_SQL = """
UPDATE pgrag.graph_nodes n SET document_id = NULL WHERE document_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM pgrag.documents d WHERE d.id = n.document_id);
UPDATE pgrag.graph_nodes n SET chunk_id = NULL WHERE chunk_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM pgrag.chunks c WHERE c.id = n.chunk_id);
"""


TABLES = [
    *DISTRIBUTED_TABLES,
    "collections",
    "embedding_sets",
    "graph_nodes",
    "graph_relationships",
    "search_log",
    "server_secret",
]


def _counts(conn: psycopg.Connection) -> list[tuple[str, int]]:
    out = []
    for t in TABLES:
        row = conn.execute(f"SELECT count(*) FROM pgrag.{t}").fetchone()
        out.append((t, row[0] if row else -1))
    return out


@pytest.fixture
def single_target(server_dsn: str) -> Iterator[str]:
    url = create_database(server_dsn, template=None)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    yield url
    drop_database(server_dsn, url)


def test_a_logical_export_through_the_coordinator_restores_into_one_server(
    citus: CitusCluster,
    cluster_db: tuple[str, Path],
    single_target: str,
    tmp_path: Path,
) -> None:
    """`pg_dump --data-only` of the coordinator reads the distributed tables' rows from the
    shards (Citus answers COPY ... TO through the coordinator); loaded into a database that
    `pgrag migrate` prepared in single-server mode, it gives the same rows, the same graph
    and the same search results in every mode."""
    url, _ = cluster_db
    tmp = tmp_path

    async def graph() -> None:  # nodes linked to a document and a chunk, a logged search
        settings = load_settings(database_url=url, embedding_model="hash/384")
        async with open_database(load_settings(), dsn=url, max_size=2) as db:
            service = GraphService(db.pool, settings)
            async with db.pool.connection() as conn:
                row = await (
                    await conn.execute(
                        "SELECT c.id FROM pgrag.chunks c JOIN pgrag.documents d"
                        " ON d.collection_id = c.collection_id AND d.id = c.document_id"
                        " WHERE d.path = 'b1.md'"
                    )
                ).fetchone()
            assert row
            a = await service.create_node(None, "Person", "Ann", None, "g2.md", None)
            b = await service.create_node(None, "Document", "Leave", None, None, row[0])
            await service.create_relationship(a.id, b.id, "MENTIONS", None)
            await SearchService(db.pool, PROVIDER).search(SearchRequest(query="leave"))  # logged

    asyncio.run(graph())
    with psycopg.connect(url) as conn:  # a link an older pgrag left dangling on the cluster
        conn.execute(
            "INSERT INTO pgrag.graph_nodes (label, name, document_id)"
            " VALUES ('Topic', 'Orphan', gen_random_uuid())"
        )
    export_to_single_server(citus, url, single_target)

    with psycopg.connect(url) as conn:
        rows = _counts(conn)
        links = conn.execute(
            "SELECT name, document_id, chunk_id FROM pgrag.graph_nodes ORDER BY name"
        ).fetchall()
    with psycopg.connect(single_target) as conn:
        assert _counts(conn) == rows
        assert conn.execute(
            "SELECT name, document_id, chunk_id FROM pgrag.graph_nodes ORDER BY name"
        ).fetchall() == [(n, None if n == "Orphan" else d, c) for n, d, c in links]
        assert conn.execute(  # the target is a plain single server with pgrag's own schema
            "SELECT count(*) FROM pg_extension WHERE extname = 'citus'"
        ).fetchone() == (0,)
        assert conn.execute(
            "SELECT count(*) FROM pg_constraint WHERE conname = 'graph_nodes_document_id_fkey'"
        ).fetchone() == (1,)
        # the foreign keys hold on the restored rows (the load ran with triggers off)
        assert conn.execute(
            "SELECT count(*) FROM pgrag.graph_nodes n WHERE n.document_id IS NOT NULL AND NOT"
            " EXISTS (SELECT 1 FROM pgrag.documents d WHERE d.id = n.document_id)"
        ).fetchone() == (0,)
    assert all(n > 0 for t, n in rows if t != "sheet_rows"), rows
    got = asyncio.run(_searches(single_target))
    assert all(got) and got == asyncio.run(_searches(url))

    async def ingest_after() -> list[str]:  # the restored server takes new documents
        root = tmp / "after"
        root.mkdir()
        (root / "later.md").write_text("# Later\n\nA kingfisher contract, written later.\n")
        async with open_database(load_settings(), dsn=single_target, max_size=2) as db:
            summary = await Ingestor(db.pool, PROVIDER, collection="alpha").run([root])
            assert not summary.failures, summary.failures  # ids continue past the restored ones
            page = await SearchService(db.pool, PROVIDER, log_searches=False).search(
                SearchRequest(query="kingfisher", mode="hybrid", filters={"collection": "alpha"})
            )
        return [h.path for h in page.data.results]

    assert asyncio.run(ingest_after())[:1] == ["later.md"]
