"""The output schemas pgrag publishes (compacted: no `$ref`, nullable types as type lists)
accept exactly what pydantic's schemas accept: instances generated from either one validate
under the other, for every tool of every toolset. A client validating results against a
published schema that drifted would reject good results, or pass bad ones."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema.validators import validator_for
from mcp.server import MCPServer

from pgrag.config.toolsets import MODULES as TOOLSETS
from pgrag.mcp.output_schema import compact_schema
from pgrag.mcp.server import build_server
from pgrag.settings import load_settings


def _schemas() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """toolset/tool -> (schema as pydantic generates it, schema as pgrag publishes it)."""
    out = {}
    all_but_rag = ",".join(t for t in TOOLSETS if t != "rag")  # rag excludes core
    for toolsets in (all_but_rag, "rag"):
        server = build_server(load_settings(database_url="postgresql:///x", toolsets=toolsets))
        original = asyncio.run(MCPServer.list_tools(server))
        published = {t.name: t.output_schema for t in asyncio.run(server.list_tools())}
        for t in original:
            if t.output_schema is not None:
                out[f"{toolsets.split(',')[0]}/{t.name}"] = (t.output_schema, published[t.name])
    return out


SCHEMAS = _schemas()


def test_every_tool_with_structured_output_publishes_a_self_contained_schema() -> None:
    assert {"core/search", "core/get_pages", "core/list_documents"} <= SCHEMAS.keys()
    for name, (original, published) in SCHEMAS.items():
        assert "$ref" not in json.dumps(published), name
        assert len(json.dumps(published)) < 3 * len(json.dumps(original)), name


def _valid(schema: dict[str, Any], instance: Any) -> bool:
    return validator_for(schema)(schema).is_valid(instance)


ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=4,
)
SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "boolean": st.booleans(),
    "integer": st.integers(-3, 3),
    "number": st.integers(-3, 3) | st.floats(-3, 3),
    "string": st.text(max_size=6),
}


def near(schema: dict[str, Any], root: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Mostly instances of `schema` (resolved against root's $defs), one value in ten
    anything at all: near misses at every depth, so either schema rejecting what the other
    accepts shows up."""
    return st.integers(0, 9).flatmap(lambda n: ANY_JSON if n == 0 else _conforming(schema, root))


def _conforming(schema: dict[str, Any], root: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "$ref" in schema:
        return near(root["$defs"][schema["$ref"].rsplit("/", 1)[1]], root)
    if "anyOf" in schema:
        return st.one_of([near(s, root) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([_conforming({**schema, "type": k}, root) for k in kind])
    if kind == "array":
        return st.lists(near(schema.get("items", {}), root), max_size=2)
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        fields = {k: near(v, root) for k, v in props.items() if k in required}
        optional = {k: near(v, root) for k, v in props.items() if k not in required}
        return st.fixed_dictionaries(fields, optional=optional)
    return SCALARS.get(kind, ANY_JSON)


@pytest.mark.parametrize("tool", sorted(SCHEMAS))
@settings(suppress_health_check=list(HealthCheck), max_examples=60)
@given(data=st.data())
def test_published_and_generated_schemas_accept_the_same_instances(
    tool: str, data: st.DataObject
) -> None:
    original, published = SCHEMAS[tool]
    for source in (original, published):
        instance = data.draw(near(source, source))
        assert _valid(original, instance) == _valid(published, instance), instance


def test_nullable_enums_and_recursive_models_keep_their_exact_meaning() -> None:
    schema = {
        "type": "object",
        "properties": {
            "mode": {"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]},
            "size": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]},
            "tree": {"$ref": "#/$defs/Node"},
        },
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            }
        },
    }
    out = compact_schema(schema)
    assert out["properties"]["mode"] == schema["properties"]["mode"]  # enum: left as anyOf
    assert out["properties"]["size"] == {"type": ["integer", "null"], "minimum": 1}
    assert out["$defs"]["Node"]["properties"]["kids"]["items"] == {"$ref": "#/$defs/Node"}
    for instance, ok in [
        ({"mode": None, "size": None, "tree": {"kids": [{"kids": []}]}}, True),
        ({"mode": "c"}, False),
        ({"size": 0}, False),
        ({"tree": {"kids": [{"kids": "x"}]}}, False),
    ]:
        assert _valid(out, instance) is ok is _valid(schema, instance), instance
