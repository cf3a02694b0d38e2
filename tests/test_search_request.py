"""SearchRequest is the one declaration of a search: the MCP tool's input schema, the REST
query parameters, the CLI's options and the console's form are derived from its fields (and
its filters'), so each field reaches every transport; the mode table carries dispatch."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from mcp.server.mcpserver import MCPServer
from starlette.datastructures import QueryParams

from pgrag.cli.app import cli
from pgrag.cli.search_commands import search as search_command
from pgrag.errors import InvalidArgument
from pgrag.http.app import create_app
from pgrag.mcp.server import build_server
from pgrag.search.flat import FILTER_FIELDS, FLAT_FIELDS, REQUEST_FIELDS, flat_values, from_flat
from pgrag.search.models import SearchFilters, SearchRequest
from pgrag.search.modes import DISTINCT_MODES, FUSION, MODES, MODES_HELP, RANKERS, modes_table
from pgrag.settings import load_settings

PGRAG = Path(__file__).resolve().parent.parent / "pgrag"
SETTINGS = {"database_url": "postgresql:///x", "toolsets": "core"}


def test_the_mcp_tool_takes_every_field_of_the_request() -> None:
    server = build_server(load_settings(**SETTINGS))
    tools = {t.name: t for t in asyncio.run(MCPServer.list_tools(server))}
    schema = tools["search"].input_schema
    assert list(schema["properties"]) == list(SearchRequest.model_fields)
    assert schema["required"] == ["query"]
    limit = SearchRequest.model_fields["limit"]
    assert schema["properties"]["limit"]["default"] == limit.default
    assert schema["properties"]["mode"]["description"] == MODES_HELP
    filters = schema["$defs"]["SearchFilters"]["properties"]
    assert list(filters) == list(SearchFilters.model_fields)


def test_rest_takes_every_flat_field_as_a_query_parameter() -> None:
    app = create_app(load_settings(**SETTINGS))
    op = app.openapi()["paths"]["/api/search"]["get"]
    names = [p["name"] for p in op["parameters"]]
    assert names == ["q", *[n for n in FLAT_FIELDS if n != "query"]]


def test_the_cli_has_an_option_for_every_flat_field() -> None:
    options = {p.name for p in search_command.params}
    assert set(FLAT_FIELDS) - {"query", "continuation_token"} <= options
    help_text = CliRunner().invoke(cli, ["search", "--help"]).output
    assert "--file-type" in help_text and "--date-from" in help_text


def test_flat_values_build_the_same_request_as_the_nested_model() -> None:
    url = "q=tea&mode=keyword&limit=3&file_type=pdf&file_type=docx&tags=a&explain=true"
    got = from_flat(flat_values(QueryParams(url).getlist))
    want = SearchRequest(
        query="tea",
        mode="keyword",
        limit=3,
        explain=True,
        filters=SearchFilters(file_type=["pdf", "docx"], tags=["a"]),
    )
    assert got == want
    assert set(REQUEST_FIELDS).isdisjoint(FILTER_FIELDS)


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"q": "x", "limit": "2.0"}, "limit"),
        ({"q": "x", "date_from": "soon"}, "date_from"),
        ({"q": "x", "date_to": "0"}, "date_to"),  # not the Unix epoch (the OpenAPI fuzzer's)
    ],
)
def test_a_bad_flat_value_names_its_field(values: dict[str, str], field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        from_flat(values)
    assert caught.value.detail == {"field": field}


def test_the_mode_table_dispatches_and_says_what_reranks_and_replays() -> None:
    assert {spec.ranker for spec in MODES.values()} == set(RANKERS)
    for mode in DISTINCT_MODES:
        spec = MODES[mode]
        assert spec.description and spec.description in MODES_HELP
        assert spec.rerankable == spec.replayable == (spec.ranker is FUSION)
    # no mode's behaviour is picked by its ranker outside the table, and the call of a
    # ranker names no ranker's SQL: it comes from the table's row
    by_ranker = re.compile(r"ranker(\.name)?\s+(is|==)\s+(not\s+)?(Ranker\.|FUSION|REGEX|\W)")
    found = [
        f"{p.relative_to(PGRAG)}:{n}"
        for p in sorted(PGRAG.rglob("*.py"))
        if p.name != "modes.py"
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if by_ranker.search(line)
    ]
    assert found == []
    functions = re.compile(r"\b(rank_\w+|hybrid_search\w*|regex_search|regex_ranked)\b")
    for module in ("search/ranking.py", "search/sql.py", "search/engine.py"):
        text = (PGRAG / module).read_text(encoding="utf-8")
        assert functions.findall(text) == [], f"{module} names a ranker's SQL"


def test_the_docs_show_the_mode_table() -> None:
    page = (PGRAG.parent / "docs" / "ranking.md").read_text(encoding="utf-8")
    start, end = "<!-- modes-table:start -->\n", "\n<!-- modes-table:end -->"
    assert page.split(start, 1)[1].split(end, 1)[0] == modes_table(), (
        "docs/ranking.md's mode table drifted: `python -m pgrag.search.modes` prints it"
    )
