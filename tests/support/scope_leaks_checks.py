"""The scope-leak matrix's checks: a probe run against a deployment, what counts as a leak,
and the coverage check that fails for a listed tool without a probe."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.settings import load_settings
from tests.support.databases import create_database, drop_database
from tests.support.kb_server import (
    FULL_KEY,
    HASH_MODEL,
    KB_COLLECTION,
    SCOPED_KEY,
    http_server,
)
from tests.support.scope_leaks import (
    CONTRACT_MD,
    COUNT_KEYS,
    DEPLOYMENT_TOOLSETS,
    WRITABLE_FILES,
    WRITABLE_KEYS,
    WRITABLE_ROLES,
    WRITABLE_TOOLSETS,
    WRITER_KEY,
    Outcome,
    Probe,
    _data,
    call_rest,
    call_tool,
    fill,
    list_resources,
    read_resource,
    shape,
    world_of,
)
from tests.support.scope_leaks_probes import CASES, PROBES, Deployment, connected


async def _ingest_small(dsn: str, root: Path) -> None:
    for collection, files in WRITABLE_FILES.items():
        for rel, text in files.items():
            (root / collection / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / collection / rel).write_text(text, encoding="utf-8")
        async with open_database(load_settings(), dsn=dsn) as db:
            await Ingestor(db.pool, HashEmbedder(HASH_MODEL), collection=collection).run(
                [root / collection]
            )


async def _ok(client: Client, tool_name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool_name, args)
    assert not result.is_error, result.structured_content
    return result.structured_content["data"]  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def writable_deployment(dsn: str, tmp: Path) -> AsyncIterator[Deployment]:
    """`dsn`, a database of its own (hash embeddings), behind a writable server saving to
    kb, with saved documents and graph rows to aim at. Also run on a Citus cluster
    (tests/test_citus_scopes.py)."""
    env = {
        "PGRAG_TOOLSETS": WRITABLE_TOOLSETS,
        "PGRAG_READ_ONLY": "false",
        "PGRAG_COLLECTION": KB_COLLECTION,
        "PGRAG_HOME": str(tmp / "home"),
    }
    await _ingest_small(dsn, tmp / "tree")
    flags = ("--embedding-model", HASH_MODEL, "--api-keys", WRITABLE_KEYS)
    with http_server(dsn, *flags, env=env) as server:
        keys = {"full": FULL_KEY, "scoped": SCOPED_KEY, "writer": WRITER_KEY}
        async with connected(server, keys) as (clients, rests):
            full = clients["full"]
            saved = {}
            for role in ("saved", "doomed", "writer_doomed"):
                note = {"topic": f"Northwind {role} notes", "tags": ["northwind"]}
                data = await _ok(full, "save_document", {**note, "content": CONTRACT_MD})
                saved[role] = data["path"]
            w = world_of(dsn, {**WRITABLE_ROLES, **saved})
            a_node = await _ok(
                full,
                "graph_create_node",
                {"label": "Location", "name": "Lisbon offsite venue", "document_id": w.a},
            )
            b_node = await _ok(
                full,
                "graph_create_node",
                {"label": "Organization", "name": "Northwind", "document_id": w.b["doc"]},
            )
            rel = await _ok(
                full,
                "graph_create_relationship",
                {"from_id": a_node["id"], "to_id": b_node["id"], "type": "RELATED_TO"},
            )
            w.graph = {"a": a_node["id"], "b": b_node["id"], "rel": rel["id"]}
            w.markers += (b_node["id"],)  # a node linked to a B document is B's
            yield Deployment("writable", server, w, clients, rests, writable=True)


@pytest.fixture(scope="module")
async def writable(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Deployment]:
    """Its own small database, writable, saving to kb: the writes the matrix tries never
    touch the shared knowledge base."""
    dsn = create_database(server_dsn)
    try:
        async with writable_deployment(dsn, tmp_path_factory.mktemp("scope-leaks")) as dep:
            yield dep
    finally:
        drop_database(server_dsn, dsn)


async def run(dep: Deployment, who: str, probe: Probe, args: dict[str, Any]) -> Outcome:
    if probe.kind == "tool":
        return await call_tool(dep.clients[who], probe.target, args)
    if probe.kind == "resource":
        uri = re.sub(r"\{\?\w+\}", "", probe.target)  # an RFC 6570 query part: omitted
        return await read_resource(dep.clients[who], uri.format(**args))
    if probe.kind == "resources/list":
        return await list_resources(dep.clients[who], args.get("cursor"))
    return await call_rest(dep.rest[who], probe.target, args)


def leaked(o: Outcome, markers: tuple[str, ...], args: dict[str, Any]) -> list[str]:
    """The markers in the answer that the caller did not send itself."""
    asked = json.dumps(args, ensure_ascii=False, default=str)
    text = o.text
    return [m for m in markers if m in text and m not in asked]


def over_counts(o: Outcome, bound: int) -> list[Any]:
    """Collection-wide counts in the answer (totals, status counts, documents per folder)
    larger than what A holds. Per-result counts (snippets of one hit) are not looked at."""
    found: list[Any] = []
    for level in (o.body, _data(o.body)):
        if not isinstance(level, dict):
            continue
        found += [level[k] for k in COUNT_KEYS if isinstance(level.get(k), int)]
        if isinstance(level.get("counts"), dict):
            found.append(sum(level["counts"].values()))
        if isinstance(level.get("folders"), list):
            found += [f["documents"] for f in level["folders"]]
    return [v for v in found if v > bound]


@pytest.fixture
def deployment(where: str, request: pytest.FixtureRequest) -> Deployment:
    """The deployment a case runs on (a sync fixture: async ones cannot be looked up from
    inside a running test)."""
    return request.getfixturevalue(where)  # type: ignore[no-any-return]


async def check_probe(dep: Deployment, probe: Probe) -> None:
    """One case of the matrix (also run on a Citus cluster: tests/test_citus_scopes.py)."""
    w = dep.world
    args = fill(probe.args, w)
    markers = w.writer_markers if probe.attacker == "writer" else w.markers
    got = await run(dep, probe.attacker, probe, args)

    assert got.code in probe.expect.split("|"), (probe.expect, got.code, got.body)
    assert not (bad := leaked(got, markers, args)), f"B leaked: {bad}\n{got.text[:3000]}"
    if got.code == "ok" and probe.counts:
        assert not (big := over_counts(got, w.a_total)), f"counts above A's: {big}"
    if probe.contains is not None:  # a control: it reached the attacker's own data
        assert fill(probe.contains, w) in got.text, got.text[:3000]

    full = None
    if probe.full and (dep.writable or not probe.writes):
        full = await run(dep, "full", probe, args)
        if probe.full == "sees_b":  # the probe aims at something real
            assert leaked(full, markers, args), f"the full key saw no B: {full.text[:2000]}"
        else:
            assert full.code == "ok", full.body
    if probe.check is not None:
        probe.check(got, full, w)
    if probe.oracle is not None:  # the error for B is the error for nothing
        fake = fill(probe.oracle, w)
        nothing = await run(dep, probe.attacker, probe, fake)
        refs = tuple(
            str(v)
            for d in (args, fake)
            for v in _leaf_values(d)
            if v not in set(_leaf_values(args)) & set(_leaf_values(fake))
        )
        assert shape(got, refs) == shape(nothing, refs), (got.body, nothing.body)


def _leaf_values(d: Any) -> list[str]:
    if isinstance(d, dict):
        return [x for v in d.values() for x in _leaf_values(v)]
    if isinstance(d, list | tuple):
        return [x for v in d for x in _leaf_values(v)]
    return [str(d)]


def _matrix_tools(toolsets: str) -> set[str]:
    names = set(toolsets.split(","))
    return {p.target for p in PROBES if p.kind == "tool" and p.toolset in names}


async def check_coverage(where: str, dep: Deployment) -> None:
    """The tools, resource templates and routes of one deployment are the probed ones (also
    run on a Citus cluster: tests/test_citus_scopes.py)."""
    client = dep.clients["scoped"]
    listed = {t.name for t in (await client.list_tools()).tools}
    assert listed == _matrix_tools(DEPLOYMENT_TOOLSETS[where]), (
        f"tools without probes: {listed - _matrix_tools(DEPLOYMENT_TOOLSETS[where])}"
    )
    templates = {
        t.uri_template for t in (await client.list_resource_templates()).resource_templates
    }
    probed = {p.target for p in PROBES if p.kind == "resource"}
    assert templates <= probed, f"resource templates without probes: {templates - probed}"
    static = await client.list_resources()
    assert all(str(r.uri).startswith("pgrag://documents/") for r in static.resources)
    spec = (await dep.rest["full"].get("/openapi.json")).json()
    routes = {f"{m.upper()} {path}" for path, ops in spec["paths"].items() for m in ops}
    rest_probed = {p.target for p in PROBES if p.kind == "rest"}
    assert routes == rest_probed, (
        f"routes without probes: {routes - rest_probed}; probes without routes: "
        f"{rest_probed - routes}"
    )
    if where == "core":
        on_core = {p.target for where_, p in CASES if where_ == "core" and p.kind == "rest"}
        assert on_core == routes, routes - on_core
