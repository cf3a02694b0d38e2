"""The graph toolset's traversal, search and document links, through a real MCP client."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest
from mcp import Client, StdioServerParameters

from tests.support.graph import (
    HASH,
    WRITE_TOOLS,
    call,
    chain,
    count,
    existing_ids,
    fails,
    fill,
    graph_client,
    ingest_one,
    names,
    node,
    ok,
    rel,
)
from tests.support.servers import free_port, wait_http

pytestmark = pytest.mark.anyio


async def test_find_path_is_shortest_respects_direction_types_and_depth(dsn: str) -> None:
    async with graph_client(dsn) as c:
        g = await chain(c)
        # undirected (default): the cycle edge C -> A makes A-C one step
        p = await ok(c, "graph_find_path", from_id=g["A"], to_id=g["D"], types=["RELATED_TO"])
        assert p["found"] is True and p["length"] == 2
        assert names(p["nodes"]) == ["A", "C", "D"]
        assert [r["id"] for r in p["relationships"]] == [g["CA"], g["CD"]]
        # directed: only from -> to
        p = await ok(
            c,
            "graph_find_path",
            from_id=g["A"],
            to_id=g["D"],
            types=["RELATED_TO"],
            direction="out",
        )
        assert names(p["nodes"]) == ["A", "B", "C", "D"] and p["length"] == 3
        for r, (src, dst) in zip(
            p["relationships"], zip(p["nodes"], p["nodes"][1:], strict=False), strict=True
        ):
            assert (r["from_id"], r["to_id"]) == (src["id"], dst["id"])
        # no type filter: the CITES shortcut
        p = await ok(c, "graph_find_path", from_id=g["A"], to_id=g["G"])
        assert names(p["nodes"]) == ["A", "G"] and p["relationships"][0]["type"] == "CITES"
        # six RELATED_TO steps: found at max_depth 6, not at 5
        p = await ok(
            c,
            "graph_find_path",
            from_id=g["A"],
            to_id=g["G"],
            types=["RELATED_TO"],
            direction="out",
            max_depth=6,
        )
        assert p["length"] == 6 and names(p["nodes"]) == list("ABCDEFG")
        short = await call(
            c,
            "graph_find_path",
            from_id=g["A"],
            to_id=g["G"],
            types=["RELATED_TO"],
            direction="out",
            max_depth=5,
        )
        assert short["ok"] and short["data"]["found"] is False and short["data"]["nodes"] == []
        assert short["status"]["message"] == "NO_PATH"
        assert [a["id"] for a in short["actions"]] == ["INCREASE_DEPTH"]
        # against the direction there is no path; an isolated node has none either
        back = await ok(
            c,
            "graph_find_path",
            from_id=g["G"],
            to_id=g["A"],
            types=["RELATED_TO"],
            direction="out",
        )
        assert back["found"] is False
        assert (await ok(c, "graph_find_path", from_id=g["A"], to_id=g["lonely"]))["found"] is False
        err = await fails(
            c, "graph_find_path", "INVALID_ARGUMENT", from_id=g["A"], to_id=g["G"], max_depth=7
        )
        assert "max_depth" in err["message"]
        missing = "00000000-0000-4000-8000-000000000002"
        err = await fails(c, "graph_find_path", "NOT_FOUND", from_id=g["A"], to_id=missing)
        assert err["detail"]["field"] == "to_id"
        g["H"] = await node(c, "Concept", "H")
        await rel(c, g["G"], g["H"])  # H is 7 RELATED_TO steps from A

    # the same SQL from psql, where the depth caps (6 and 3) hold whatever is asked
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT depth, relationship_ids FROM pgrag.graph_find_path(%s, %s, 4, %s, 'out')",
            (g["A"], g["D"], ["RELATED_TO"]),
        ).fetchone()
        assert row[0] == 3 and [str(r) for r in row[1]] == [g["AB"], g["BC"], g["CD"]]
        six = "SELECT count(*) FROM pgrag.graph_find_path(%s, %s, 50, %s, 'out')"
        assert conn.execute(six, (g["A"], g["G"], ["RELATED_TO"])).fetchone()[0] == 1
        assert conn.execute(six, (g["A"], g["H"], ["RELATED_TO"])).fetchone()[0] == 0
        far = conn.execute(
            "SELECT max(distance), count(*) FROM pgrag.graph_neighbors(%s, 50, %s, 'out')",
            (g["A"], ["RELATED_TO"]),
        ).fetchone()
        assert far == (3, 4)  # A itself (distance 0), B, C, D


async def test_find_neighbors_depths_cycles_and_limits(dsn: str) -> None:
    async with graph_client(dsn) as c:
        g = await chain(c)
        one = await ok(c, "graph_find_neighbors", id=g["A"])
        assert one["node"]["name"] == "A"
        assert {(n["name"], n["distance"]) for n in one["nodes"]} == {("B", 1), ("C", 1), ("G", 1)}
        assert {r["id"] for r in one["relationships"]} == {g["AB"], g["CA"], g["AG"]}

        two = await ok(c, "graph_find_neighbors", id=g["A"], depth=2, types=["RELATED_TO"])
        # C is reached directly (C -> A) and via B: listed once, at distance 1
        assert sorted((n["name"], n["distance"]) for n in two["nodes"]) == [
            ("B", 1),
            ("C", 1),
            ("D", 2),
        ]
        assert {r["id"] for r in two["relationships"]} == {g["AB"], g["BC"], g["CA"], g["CD"]}

        # directed walk round the cycle A -> B -> C -> A: A itself is not a neighbour
        out = await ok(
            c, "graph_find_neighbors", id=g["A"], depth=3, types=["RELATED_TO"], direction="out"
        )
        assert [(n["name"], n["distance"]) for n in out["nodes"]] == [("B", 1), ("C", 2), ("D", 3)]
        assert g["CA"] in {r["id"] for r in out["relationships"]}
        assert out["total"] == 3 and out["truncated"] is False

        incoming = await ok(c, "graph_find_neighbors", id=g["A"], direction="in")
        assert names(incoming["nodes"]) == ["C"]

        limited = await call(c, "graph_find_neighbors", id=g["A"], depth=3, limit=2)
        assert limited["ok"] and len(limited["data"]["nodes"]) == 2
        assert limited["data"]["truncated"] is True and limited["data"]["total"] == 6
        assert limited["status"]["code"] == "partial_success"
        assert [n["distance"] for n in limited["data"]["nodes"]] == [1, 1]  # nearest first

        assert (await ok(c, "graph_find_neighbors", id=g["lonely"], depth=3))["nodes"] == []
        await fails(c, "graph_find_neighbors", "INVALID_ARGUMENT", id=g["A"], depth=4)
        await fails(
            c, "graph_find_neighbors", "NOT_FOUND", id="00000000-0000-4000-8000-000000000003"
        )


async def test_fuzzy_search_typos_chinese_and_properties(dsn: str) -> None:
    async with graph_client(dsn) as c:
        pg = await node(c, "Organization", "PostgreSQL Global Development Group")
        await node(c, "Event", "PGConf Europe")
        beijing = await node(c, "Location", "北京")
        pku = await node(c, "Organization", "北京大学", city="北京")
        sjtu = await node(c, "Organization", "上海交通大学")
        alice = await node(c, "Person", "Alice Smith", research="图数据库 and knowledge graphs")

        typo = await ok(c, "graph_fuzzy_search", query="Postgress Global")
        assert typo["items"][0]["id"] == pg
        assert typo["items"][0]["trigram_score"] > 0

        zh = await ok(c, "graph_fuzzy_search", query="北京", limit=10)
        ids = [i["id"] for i in zh["items"]]
        assert ids[:2] == [beijing, pku]
        assert zh["items"][0]["score"] == 1.0
        assert sjtu not in ids
        assert [i["rank"] for i in zh["items"]] == list(range(1, len(ids) + 1))
        scores = [i["score"] for i in zh["items"]]
        assert scores == sorted(scores, reverse=True)
        assert all(0 <= s <= 1 for s in scores)

        universities = await ok(c, "graph_fuzzy_search", query="大学", labels=["Organization"])
        assert {i["id"] for i in universities["items"]} == {pku, sjtu}
        only_places = await ok(c, "graph_fuzzy_search", query="北京大学", labels=["Location"])
        assert [i["id"] for i in only_places["items"]] == [beijing]

        by_property = await ok(c, "graph_fuzzy_search", query="图数据库")
        assert by_property["items"][0]["id"] == alice
        assert by_property["items"][0]["text_score"] == 1.0
        assert by_property["items"][0]["name_score"] == 0

        none = await call(c, "graph_fuzzy_search", query="qqqzzzxxx")
        assert none["ok"] and none["data"]["items"] == []
        assert none["status"]["message"] == "NO_MATCHES"
        await fails(c, "graph_fuzzy_search", "INVALID_ARGUMENT", query="x", limit=51)


async def test_nodes_link_to_documents_and_chunks(dsn: str, tmp_path: Path) -> None:
    doc_id, (chunk, other_chunk) = await ingest_one(dsn, tmp_path)
    async with graph_client(dsn) as c:
        # by path: the same references the core tools accept
        doc_node = await ok(
            c, "graph_create_node", label="Document", name="lovelace.md", document_id="lovelace.md"
        )
        assert doc_node["document_id"] == doc_id and doc_node["chunk_id"] is None
        ada = await ok(c, "graph_create_node", label="Person", name="Ada Lovelace", chunk_id=chunk)
        assert ada["chunk_id"] == chunk and ada["document_id"] == doc_id  # chunk implies document
        mention = await rel(c, doc_node["id"], ada["id"], "MENTIONS")

        linked = await ok(c, "graph_find_node", document_id=doc_id)
        assert {n["id"] for n in linked["items"]} == {doc_node["id"], ada["id"]}
        mentions = await ok(c, "graph_find_relationship", from_id=doc_node["id"], type="MENTIONS")
        assert [r["id"] for r in mentions["items"]] == [mention]

        err = await fails(
            c,
            "graph_create_node",
            "INVALID_ARGUMENT",
            label="Person",
            name="x",
            document_id=doc_id,
            chunk_id=other_chunk,
        )
        assert err["detail"]["field"] == "chunk_id"
        await fails(
            c, "graph_create_node", "NOT_FOUND", label="Document", name="x", document_id="nope.md"
        )
        await fails(c, "graph_create_node", "NOT_FOUND", label="Chunk", name="x", chunk_id=10**9)

        unlinked = await ok(c, "graph_update_node", id=ada["id"], unlink=True)
        assert unlinked["node"]["document_id"] is None and unlinked["node"]["chunk_id"] is None

    # removing the document keeps the graph, without the dangling link
    with psycopg.connect(dsn) as conn:
        conn.execute("DELETE FROM pgrag.documents WHERE id = %s", (doc_id,))
    async with graph_client(dsn) as c:
        kept = (await ok(c, "graph_find_node", id=doc_node["id"]))["items"][0]
        assert kept["document_id"] is None
        assert (await ok(c, "graph_find_relationship", id=mention))["items"][0][
            "type"
        ] == "MENTIONS"


async def test_read_only_server_refuses_every_write(dsn: str) -> None:
    ids = await existing_ids(dsn)
    async with graph_client(dsn, read_only=True) as c:
        for tool, args in WRITE_TOOLS.items():
            err = await fails(c, tool, "FORBIDDEN", **fill(args, ids))
            assert "read-only" in err["message"]
        # reads still work
        assert (await ok(c, "graph_find_node", id=ids["node"]))["items"][0]["name"] == "Writer"
        assert (await ok(c, "graph_find_path", from_id=ids["node"], to_id=ids["other"]))["found"]
    assert count(dsn, "graph_nodes") == 2
    assert count(dsn, "graph_relationships") == 1
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT name FROM pgrag.graph_nodes ORDER BY name").fetchall() == [
            ("Reader",),
            ("Writer",),
        ]


async def test_stdio_server_accepts_writes_unless_told_otherwise(dsn: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PGRAG_READ_ONLY"}
    env["PGRAG_HOME"] = str(tmp_path / "home")
    args = ["-m", "pgrag", "--database-url", dsn, "--embedding-model", HASH]
    writable = StdioServerParameters(
        command=sys.executable, args=[*args, "--toolsets", "core,graph", "serve"], env=env
    )
    async with Client(writable, read_timeout_seconds=60) as c:
        created = await ok(c, "graph_create_node", label="Topic", name="stdio")
    read_only = StdioServerParameters(
        command=sys.executable,
        args=[*args, "--toolsets", "core,graph", "--read-only", "true", "serve"],
        env=env,
    )
    async with Client(read_only, read_timeout_seconds=60) as c:
        await fails(c, "graph_delete_node", "FORBIDDEN", id=created["id"])
    assert count(dsn, "graph_nodes") == 1


async def test_http_server_is_read_only_unless_told_otherwise(dsn: str, tmp_path: Path) -> None:
    ids = await existing_ids(dsn)
    port = free_port()
    env = {
        **os.environ,
        "PGRAG_DATABASE_URL": dsn,
        "PGRAG_EMBEDDING_MODEL": HASH,
        "PGRAG_TOOLSETS": "core,graph",
        "PGRAG_HOME": str(tmp_path / "home"),
    }
    env.pop("PGRAG_READ_ONLY", None)
    log = tmp_path / "serve.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pgrag", "serve", "--transport", "http", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", timeout=90)
        async with Client(f"http://127.0.0.1:{port}/mcp") as c:
            for tool in ("graph_create_node", "graph_delete_node"):
                error = await fails(c, tool, "FORBIDDEN", **fill(WRITE_TOOLS[tool], ids))
                assert "read-only" in error["message"]
            found = await ok(c, "graph_find_node", id=ids["node"])
            assert found["items"][0]["name"] == "Writer"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert count(dsn, "graph_nodes") == 2, log.read_text()
