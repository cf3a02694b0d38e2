"""Change notifications on a real Citus cluster (docs/scale-out.md, "Change notifications").

The `documents_changed` trigger is dropped when the schema is distributed (a change of a
distributed table runs on a worker's shard, where no pgrag server listens), so every
writer of pgrag NOTIFYs on the coordinator inside the change's transaction:
- each kind of change (ingest of new, changed, failed and removed files, watch-mode
  deletes, the write toolset's save/update/delete, the REST/CLI delete) sends on the
  cluster exactly what the trigger sends on a single server; a rolled-back change sends
  nothing; a change made by hand in SQL sends nothing on the cluster (documented);
- two `pgrag serve --transport http` processes against the coordinator serve the same data
  and both relay every change, whichever process or CLI made it, to their MCP clients.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg

from tests.support.citus import CitusCluster, fresh_database, migrate
from tests.support.notify import writer_steps
from tests.support.two_servers import two_servers_relay_every_change

HAND_MADE = "by hand in SQL"
ROLLED_BACK = "a delete rolled back"


def test_every_writer_notifies_on_the_coordinator_as_the_trigger_does_on_one_server(
    citus: CitusCluster, dsn: str, tmp_path: Path
) -> None:
    url = fresh_database(citus)
    asyncio.run(migrate(url, True))
    with psycopg.connect(url) as conn:
        triggers = conn.execute(
            "SELECT tgname FROM pg_trigger"
            " WHERE tgrelid = 'pgrag.documents'::regclass AND NOT tgisinternal"
        ).fetchall()
        distributed = conn.execute(
            "SELECT count(*) FROM pg_dist_partition WHERE logicalrelid = 'pgrag.documents'::regclass"
        ).fetchone()
    assert distributed == (1,) and triggers == []  # the writer is the only one to notify

    on_citus = asyncio.run(writer_steps(url, tmp_path / "citus"))
    single = asyncio.run(writer_steps(dsn, tmp_path / "single"))

    assert on_citus[ROLLED_BACK] == single[ROLLED_BACK] == []
    assert single[HAND_MADE] == ["UPDATE"]  # the trigger sees psql
    assert on_citus[HAND_MADE] == []  # the cluster does not (docs/scale-out.md)
    changes = {k: v for k, v in single.items() if k not in (ROLLED_BACK, HAND_MADE)}
    assert all(changes.values()), f"a change sent nothing on a single server: {single}"
    assert {k: on_citus[k] for k in changes} == changes
    # spot checks of what the trigger (and so the writer) sends
    assert changes["ingest 3 new files and 1 broken one"].count("UPDATE") >= 4
    assert "DELETE" in changes["ingest after a file was removed"]
    assert changes["write toolset: delete"] == ["DELETE"]


def test_two_serve_processes_on_the_cluster_both_relay_every_change(
    citus: CitusCluster, tmp_path: Path
) -> None:
    url = fresh_database(citus)
    asyncio.run(migrate(url, True))
    asyncio.run(two_servers_relay_every_change(url, tmp_path))
    with psycopg.connect(url) as conn:  # it all ran on the distributed tables
        shards = conn.execute(
            "SELECT count(DISTINCT shardid) FROM pg_dist_shard"
            " WHERE logicalrelid = 'pgrag.documents'::regclass"
        ).fetchone()
    assert shards is not None and shards[0] > 1
