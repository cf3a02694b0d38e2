"""The `graph` toolset (SPEC §5.3, seed 002 §2) through a real MCP client on a real database:
node and relationship CRUD, DETACH semantics, the label/type allow-lists, shortest paths and
neighbourhoods over cycles with depth limits, fuzzy search in English and Chinese, links to
ingested documents, and refusal of writes on read-only servers (explicit, and HTTP's default).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client, StdioServerParameters

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.mcp.server import build_server
from pgrag.settings import load_settings
from tests.support.servers import free_port, wait_http

pytestmark = pytest.mark.anyio

HASH = "hash/384"
WRITE_TOOLS = {
    "graph_create_node": {"label": "Person", "name": "Nobody"},
    "graph_update_node": {"id": "{node}", "name": "Renamed"},
    "graph_delete_node": {"id": "{node}", "detach": True},
    "graph_create_relationship": {"from_id": "{node}", "to_id": "{node}", "type": "RELATED_TO"},
    "graph_update_relationship": {"id": "{rel}", "properties": {"x": 1}},
    "graph_delete_relationship": {"id": "{rel}"},
}


@contextlib.asynccontextmanager
async def graph_client(dsn: str, **settings: Any) -> AsyncIterator[Client]:
    server = build_server(
        load_settings(database_url=dsn, toolsets="core,graph", embedding_model=HASH, **settings)
    )
    async with Client(server, raise_exceptions=True) as client:
        yield client


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    payload = result.structured_content
    assert payload is not None
    assert payload["ok"] is (not result.is_error)
    return payload


async def ok(client: Client, tool: str, **args: Any) -> Any:
    payload = await call(client, tool, **args)
    assert payload["ok"], payload["error"]
    return payload["data"]


async def fails(client: Client, tool: str, code: str, **args: Any) -> dict[str, Any]:
    payload = await call(client, tool, **args)
    assert not payload["ok"], payload["data"]
    assert payload["error"]["code"] == code, payload["error"]
    assert payload["status"]["code"] == "error"
    return payload["error"]


async def node(client: Client, label: str, name: str, **props: Any) -> str:
    data = await ok(client, "graph_create_node", label=label, name=name, properties=props)
    return str(data["id"])


async def rel(client: Client, src: str, dst: str, type: str = "RELATED_TO", **props: Any) -> str:
    data = await ok(
        client, "graph_create_relationship", from_id=src, to_id=dst, type=type, properties=props
    )
    return str(data["id"])


def count(dsn: str, table: str) -> int:
    with psycopg.connect(dsn) as conn:
        return int(conn.execute(f"SELECT count(*) FROM pgrag.{table}").fetchone()[0])


# ------------------------------------------------------------------------------ nodes


async def test_node_create_find_update_delete(dsn: str) -> None:
    async with graph_client(dsn) as c:
        created = await ok(
            c,
            "graph_create_node",
            label="person",  # allow-listed labels match case-insensitively
            name="Ada Lovelace",
            properties={"born": 1815, "aliases": ["Ada"], "field": "mathematics"},
        )
        ada = created["id"]
        assert created["label"] == "Person"
        assert created["properties"] == {"born": 1815, "aliases": ["Ada"], "field": "mathematics"}
        await node(c, "Person", "Charles Babbage", field="mathematics")

        # the seed's form: properties.name instead of name
        seeded = await ok(c, "graph_create_node", label="Concept", properties={"name": "图灵机"})
        assert seeded["name"] == "图灵机"
        err = await fails(c, "graph_create_node", "INVALID_ARGUMENT", label="Concept")
        assert err["detail"]["field"] == "name"

        by_id = await ok(c, "graph_find_node", id=ada)
        assert [n["name"] for n in by_id["items"]] == ["Ada Lovelace"]
        by_name = await ok(c, "graph_find_node", label="Person", name="ada lovelace")
        assert [n["id"] for n in by_name["items"]] == [ada]
        by_props = await ok(c, "graph_find_node", properties={"field": "mathematics"})
        assert by_props["total"] == 2
        assert {n["name"] for n in by_props["items"]} == {"Ada Lovelace", "Charles Babbage"}
        by_value = await ok(c, "graph_find_node", property="born", value=1815)
        assert [n["id"] for n in by_value["items"]] == [ada]
        nothing = await call(c, "graph_find_node", label="Person", name="Grace Hopper")
        assert nothing["ok"] and nothing["data"]["items"] == []
        assert nothing["status"]["message"] == "NO_MATCHES"
        await fails(c, "graph_find_node", "INVALID_ARGUMENT")  # no criterion at all

        updated = await ok(
            c,
            "graph_update_node",
            id=ada,
            name="Augusta Ada King",
            properties={"born": None, "title": "Countess of Lovelace"},
        )
        assert updated["updated"] is True
        assert updated["node"]["name"] == "Augusta Ada King"
        assert updated["node"]["properties"] == {
            "aliases": ["Ada"],
            "field": "mathematics",
            "title": "Countess of Lovelace",
        }
        again = (await ok(c, "graph_find_node", id=ada))["items"][0]
        assert again["properties"] == updated["node"]["properties"]
        assert again["updated_at"] > again["created_at"]

        replaced = await ok(
            c, "graph_update_node", id=ada, properties={"only": "this"}, replace_properties=True
        )
        assert replaced["node"]["properties"] == {"only": "this"}

        missing = "00000000-0000-4000-8000-000000000000"
        await fails(c, "graph_find_node", "NOT_FOUND", id=missing)
        await fails(c, "graph_update_node", "NOT_FOUND", id=missing, name="x")
        await fails(c, "graph_delete_node", "NOT_FOUND", id=missing)
        bad = await fails(c, "graph_find_node", "INVALID_ARGUMENT", id="Ada Lovelace")
        assert "UUID" in bad["message"]

        deleted = await ok(c, "graph_delete_node", id=ada)
        assert deleted == {"deleted": True, "id": ada, "relationships_deleted": 0}
        await fails(c, "graph_find_node", "NOT_FOUND", id=ada)
    assert count(dsn, "graph_nodes") == 2


async def test_delete_needs_detach_while_relationships_exist(dsn: str) -> None:
    async with graph_client(dsn) as c:
        a = await node(c, "Person", "Alice")
        b = await node(c, "Organization", "Acme")
        r1 = await rel(c, a, b, "WORKS_FOR")
        r2 = await rel(c, b, a, "RELATED_TO")

        err = await fails(c, "graph_delete_node", "INVALID_ARGUMENT", id=a)
        assert "detach=true" in err["message"]
        assert err["detail"]["relationships"] == 2
        assert (await ok(c, "graph_find_node", id=a))["items"][0]["name"] == "Alice"
        assert count(dsn, "graph_relationships") == 2

        done = await ok(c, "graph_delete_node", id=a, detach=True)
        assert done == {"deleted": True, "id": a, "relationships_deleted": 2}
        await fails(c, "graph_find_node", "NOT_FOUND", id=a)
        for r in (r1, r2):
            await fails(c, "graph_find_relationship", "NOT_FOUND", id=r)
        assert (await ok(c, "graph_find_node", id=b))["items"][0]["name"] == "Acme"
        # a node without relationships needs no detach
        assert (await ok(c, "graph_delete_node", id=b))["deleted"] is True
    assert count(dsn, "graph_nodes") == 0


# ---------------------------------------------------------------------- relationships


async def test_relationship_create_find_update_delete(dsn: str) -> None:
    async with graph_client(dsn) as c:
        alice = await node(c, "Person", "Alice")
        acme = await node(c, "Organization", "Acme")
        paris = await node(c, "Location", "Paris")
        created = await ok(
            c,
            "graph_create_relationship",
            from_id=alice,
            to_id=acme,
            type="works_for",
            properties={"since": 2020},
        )
        works = created["id"]
        assert (created["type"], created["from_id"], created["to_id"]) == (
            "WORKS_FOR",
            alice,
            acme,
        )
        located = await rel(c, acme, paris, "LOCATED_IN")

        assert [
            r["id"] for r in (await ok(c, "graph_find_relationship", from_id=alice))["items"]
        ] == [works]
        assert [
            r["id"] for r in (await ok(c, "graph_find_relationship", to_id=paris))["items"]
        ] == [located]
        by_type = await ok(c, "graph_find_relationship", type="LOCATED_IN")
        assert [r["id"] for r in by_type["items"]] == [located]
        both = await ok(c, "graph_find_relationship", from_id=acme, to_id=alice)
        assert both["items"] == []  # relationships are directed
        one = await ok(c, "graph_find_relationship", id=works)
        assert one["items"][0]["properties"] == {"since": 2020}

        changed = await ok(
            c,
            "graph_update_relationship",
            id=works,
            properties={"since": None, "role": "engineer"},
            type="RELATED_TO",
        )
        assert changed["relationship"]["properties"] == {"role": "engineer"}
        assert changed["relationship"]["type"] == "RELATED_TO"

        missing = "00000000-0000-4000-8000-000000000001"
        err = await fails(
            c, "graph_create_relationship", "NOT_FOUND", from_id=alice, to_id=missing, type="CITES"
        )
        assert err["detail"]["field"] == "to_id"
        await fails(c, "graph_update_relationship", "NOT_FOUND", id=missing, properties={"a": 1})

        assert (await ok(c, "graph_delete_relationship", id=works))["deleted"] is True
        await fails(c, "graph_delete_relationship", "NOT_FOUND", id=works)
        await fails(c, "graph_find_relationship", "NOT_FOUND", id=works)
    assert count(dsn, "graph_relationships") == 1
    assert count(dsn, "graph_nodes") == 3


async def test_labels_and_types_outside_the_allow_list_are_forbidden(dsn: str) -> None:
    async with graph_client(dsn) as c:
        err = await fails(c, "graph_create_node", "FORBIDDEN", label="Weapon", name="x")
        assert "Person" in err["detail"]["allowed"]
        a = await node(c, "Person", "A")
        b = await node(c, "Person", "B")
        await fails(c, "graph_create_relationship", "FORBIDDEN", from_id=a, to_id=b, type="HATES")
        r = await rel(c, a, b)
        await fails(c, "graph_update_relationship", "FORBIDDEN", id=r, type="HATES")
        await fails(c, "graph_update_node", "FORBIDDEN", id=a, label="Weapon")
        await fails(c, "graph_find_path", "FORBIDDEN", from_id=a, to_id=b, types=["HATES"])
        await fails(c, "graph_find_neighbors", "FORBIDDEN", id=a, types=["HATES"])
        await fails(c, "graph_fuzzy_search", "FORBIDDEN", query="A", labels=["Weapon"])
        await fails(c, "graph_find_relationship", "FORBIDDEN", type="HATES")
    assert count(dsn, "graph_nodes") == 2
    assert count(dsn, "graph_relationships") == 1
    with psycopg.connect(dsn) as conn:
        labels = {r[0] for r in conn.execute("SELECT label FROM pgrag.graph_nodes")}
        types = {r[0] for r in conn.execute("SELECT type FROM pgrag.graph_relationships")}
    assert labels == {"Person"} and types == {"RELATED_TO"}

    # the allow-lists are configuration
    async with graph_client(
        dsn, graph_labels="Gene,Protein", graph_relationship_types="ENCODES"
    ) as c:
        gene = await node(c, "gene", "BRCA1")
        protein = await node(c, "Protein", "BRCA1 protein")
        assert (await ok(c, "graph_find_node", id=gene))["items"][0]["label"] == "Gene"
        await rel(c, gene, protein, "ENCODES")
        await fails(c, "graph_create_node", "FORBIDDEN", label="Person", name="x")
        await fails(
            c,
            "graph_create_relationship",
            "FORBIDDEN",
            from_id=gene,
            to_id=protein,
            type="RELATED_TO",
        )


async def test_the_seed_examples_work_with_the_default_allow_lists(dsn: str) -> None:
    """Seed 002's own examples use Entity nodes with RELATED_TO and MENTIONS edges."""
    async with graph_client(dsn) as c:
        acme = await node(c, "Entity", "Acme Corp", kind="company")
        contract = await node(c, "Entity", "Supply contract 2024")
        await rel(c, contract, acme, "MENTIONS")
        await rel(c, acme, contract, "RELATED_TO")
        found = await ok(c, "graph_find_node", label="Entity", name="Acme Corp")
        assert [i["id"] for i in found["items"]] == [acme]


async def test_values_are_data_never_sql(dsn: str) -> None:
    hostile = "x'); DROP TABLE pgrag.graph_nodes; --"
    async with graph_client(dsn) as c:
        n = await node(c, "Concept", hostile, note="' OR 1=1 --")
        found = await ok(c, "graph_find_node", label="Concept", name=hostile)
        assert [i["id"] for i in found["items"]] == [n]
        hits = await ok(c, "graph_fuzzy_search", query="'; DROP TABLE x; --")
        assert all(0 <= h["score"] <= 1 for h in hits["items"])
        tools = {t.name: t for t in (await c.list_tools()).tools if t.name.startswith("graph_")}
    assert len(tools) == 11
    for tool in tools.values():  # no tool takes a query language
        assert not {"cypher", "sql", "where", "statement"} & set(tool.input_schema["properties"])
    assert count(dsn, "graph_nodes") == 1


# -------------------------------------------------------------------------- traversal


async def chain(c: Client) -> dict[str, str]:
    """A -> B -> C -> D -> E -> F -> G (RELATED_TO), a cycle C -> A, and A -[CITES]-> G."""
    ids = {name: await node(c, "Concept", name) for name in "ABCDEFG"}
    for src, dst in zip("ABCDEF", "BCDEFG", strict=True):
        ids[src + dst] = await rel(c, ids[src], ids[dst])
    ids["CA"] = await rel(c, ids["C"], ids["A"])
    ids["AG"] = await rel(c, ids["A"], ids["G"], "CITES")
    ids["lonely"] = await node(c, "Concept", "Lonely")
    return ids


def names(nodes: list[dict[str, Any]]) -> list[str]:
    return [n["name"] for n in nodes]


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


# ----------------------------------------------------------------------------- search


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


# ------------------------------------------------------------------ documents and writes


async def ingest_one(dsn: str, tmp_path: Path) -> tuple[str, list[int]]:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "lovelace.md").write_text(
        "# Ada Lovelace\n\nAda Lovelace wrote the first program for the Analytical Engine.\n",
        encoding="utf-8",
    )
    (folder / "other.md").write_text("# Other\n\nSomething else entirely.\n", encoding="utf-8")
    async with open_database(load_settings(embedding_model=HASH), dsn=dsn, max_size=2) as db:
        summary = await Ingestor(db.pool, HashEmbedder(HASH), collection="kb").run([folder])
    assert len(summary.results) == 2
    with psycopg.connect(dsn) as conn:
        doc = conn.execute(
            "SELECT id::text FROM pgrag.documents WHERE path = 'lovelace.md'"
        ).fetchone()[0]
        chunks = [
            r[0]
            for r in conn.execute(
                "SELECT c.id FROM pgrag.chunks c JOIN pgrag.documents d ON d.id = c.document_id "
                "ORDER BY d.path = 'lovelace.md' DESC, c.id"
            )
        ]
        other_chunk = conn.execute(
            "SELECT c.id FROM pgrag.chunks c JOIN pgrag.documents d ON d.id = c.document_id "
            "WHERE d.path = 'other.md'"
        ).fetchone()[0]
    return doc, [chunks[0], other_chunk]


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


async def existing_ids(dsn: str) -> dict[str, str]:
    async with graph_client(dsn) as c:
        a = await node(c, "Person", "Writer")
        b = await node(c, "Person", "Reader")
        return {"node": a, "other": b, "rel": await rel(c, a, b)}


def fill(args: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    return {k: v.format(**ids) if isinstance(v, str) else v for k, v in args.items()}


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
