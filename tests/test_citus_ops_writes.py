"""Deletes, reindexing, the graph toolset, idf chunk counts and two-phase ingestion on a
Citus cluster, compared with a single server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg

from pgrag.ingest.pipeline import Outcome
from tests.support.citus_ops import (
    _both,
    _graph_and_retention,
    _graph_links_after_deletes,
    _recounted_sums,
    _reindexed,
    _state,
    _sums,
    _write_and_delete,
    pair,  # noqa: F401 (a fixture)
)
from tests.support.citus_ops_2 import _two_phase


def test_deletes_outside_a_version_keep_the_language_sums(pair: tuple[str, str, Path]) -> None:
    """Per-language sums on Citus are kept by the writer: every delete path takes the
    deleted vectors out, as the triggers do on a single server."""
    got = {side: asyncio.run(_write_and_delete(dsn, root)) for side, dsn, root in _both(pair)}
    assert got["c"]["found"] and got["c"] == got["s"]
    after = _state(pair[0])
    assert after == _state(pair[1])
    assert ("notes", "saved/draft.md") not in {r[:2] for r in after["documents"]}
    assert ("finance", "audit.md") not in {r[:2] for r in after["documents"]}
    assert after["language_sums"] == _recounted_sums(pair[0])


def test_reindex_switches_a_collection_to_another_embedding_set(
    pair: tuple[str, str, Path],
) -> None:
    url, single, _ = pair
    got = asyncio.run(_reindexed(url))
    assert all(p[0] for p in got) and got == asyncio.run(_reindexed(single))
    after = _state(url)
    assert after == _state(single)
    assert {r[1] for r in after["embeddings"] if r[0] == "hr"} == {"hash/256"}
    assert after["language_sums"] == _recounted_sums(url)
    with psycopg.connect(url) as conn:  # the old set's index went from every shard
        left = conn.execute(
            "SELECT result FROM run_command_on_shards('pgrag.embeddings', $$SELECT"
            " string_agg(indexname, ',') FROM pg_indexes WHERE schemaname || '.' || tablename = '%s'"
            " AND indexname LIKE 'embeddings_hnsw_%%'$$)"
        ).fetchall()
        sets = conn.execute(
            "SELECT es.id FROM pgrag.embedding_sets es JOIN pgrag.collections c"
            " ON c.active_set_id = es.id ORDER BY es.id"
        ).fetchall()
    names = {n for (r,) in left if r for n in r.split(",")}
    assert {n.rsplit("_", 1)[0] for n in names} == {f"embeddings_hnsw_{s}" for (s,) in sets}


def test_graph_toolset_and_log_retention_work_on_the_cluster(pair: tuple[str, str, Path]) -> None:
    url, single, _ = pair
    got = asyncio.run(_graph_and_retention(url))
    assert got == asyncio.run(_graph_and_retention(single))
    assert got["path"] == ["Signing", "Alice Legal", "HR"] and got["fuzzy"] == ["Alice Legal"]
    assert got["pruned"] == 1 and got["logs_left"] == ["new"] and got["links"] == (True, True)


def test_chunk_count_estimate_is_exact_without_reading_the_chunks(
    pair: tuple[str, str, Path],
) -> None:
    """On Citus the figure comes from the maintained per-language sums: it equals the chunk
    count, and it answers while pgrag.chunks is locked (a count over the shards would wait)."""
    url, single, _ = pair
    for dsn in (url, single):
        with psycopg.connect(dsn) as conn:
            n, estimate = conn.execute(
                "SELECT count(*), pgrag.chunk_count_estimate() FROM pgrag.chunks"
            ).fetchone() or (None, None)
        assert n and estimate == n
    with psycopg.connect(url) as locker, psycopg.connect(url) as reader:
        locker.execute("LOCK TABLE pgrag.chunks IN ACCESS EXCLUSIVE MODE")
        reader.execute("SET lock_timeout = '3s'")
        assert reader.execute("SELECT pgrag.chunk_count_estimate()").fetchone() == (n,)
        locker.rollback()


def test_deletes_and_new_versions_unlink_the_graph_as_on_a_single_server(
    pair: tuple[str, str, Path],
) -> None:
    """Single server: the foreign keys set the graph's links NULL when a document or chunk
    goes. Citus has no such key from the local graph into the shards: every delete path and
    a new version unlink the nodes in their own transaction, with the same outcome."""
    got = {
        side: asyncio.run(_graph_links_after_deletes(dsn, root / "graphs-folder"))
        for side, dsn, root in _both(pair)
    }
    assert got["c"] == got["s"]
    assert got["c"] == [
        ("chunk dir/watched.md", None, None),
        ("chunk gone.md", None, None),
        ("chunk kept.md", None, None),  # the new version replaced the chunk
        ("chunk rest.md", None, None),
        ("chunk saved/note.md", None, None),
        ("doc dir/watched.md", None, None),
        ("doc gone.md", None, None),
        ("doc kept.md", "kept.md", None),  # the document itself stays
        ("doc rest.md", None, None),
        ("doc saved/note.md", None, None),
    ]


def test_two_phase_ingest_on_the_cluster(pair: tuple[str, str, Path]) -> None:
    got = {side: asyncio.run(_two_phase(dsn, root / "phases")) for side, dsn, root in _both(pair)}
    assert got["c"] == got["s"]
    c = got["c"]
    note = "no vector yet: the semantic leg could not rank this chunk"
    assert c["keyword"] == [("zz_code.txt", note)]
    assert c["hybrid"][0] == ("zz_code.txt", note)
    assert all(r[1] == "ready" and r[2] == r[3] > 0 and r[4] == 0 for r in c["between"])
    assert all(r[2] == 0 and r[3] == r[4] for r in c["after"])
    assert c["down"] == [("memo.md", Outcome.PENDING, 1)]
    assert [r[2] for r in c["waiting"]] == [1, 0]
    assert c["resumed"] == [("memo.md", 0)]
    assert c["end"] == [(p, "ready", 0, n, n) for p, _, _, n, _ in c["after"]]
    for dsn in pair[:2]:
        with psycopg.connect(dsn) as conn:
            assert _sums(conn) == _recounted_sums(dsn)
    assert _state(pair[0]) == _state(pair[1])
