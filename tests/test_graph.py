"""The `graph` toolset (SPEC §5.3, seed 002 §2) through a real MCP client on a real database:
node and relationship CRUD, DETACH semantics, the label/type allow-lists, shortest paths and
neighbourhoods over cycles with depth limits, fuzzy search in English and Chinese, links to
ingested documents, and refusal of writes on read-only servers (explicit, and HTTP's default)."""

from __future__ import annotations

import psycopg
import pytest

from tests.support.graph import call, count, fails, graph_client, node, ok, rel

pytestmark = pytest.mark.anyio


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
