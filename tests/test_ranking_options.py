"""The ranking knobs as per-request search options (issue 42): fusion, each leg's weight and
rrf_k, bounded and validated, each changing the order exactly as MCP, REST and SQL
(pgrag.hybrid_search with the named argument) do with the same option; logged, so that
pgrag.explain_search ("Copy as SQL") replays the search as it was ranked."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import psycopg
import pytest

from tests.support.commands import pgrag_cmd
from tests.support.kb_server import KB_COLLECTION, HttpServer, KnowledgeBase, child_env
from tests.support.playground import mcp_search, rest_search, sql_order, warm_up

pytest_plugins = ("tests.support.kb_server",)


@pytest.fixture(scope="module", autouse=True)
def warm(kb_http: HttpServer) -> None:
    warm_up(kb_http)


QUERY = "quarterly revenue budget"
LIMIT = 10
# each knob, and the search it must reorder: the default, or rrf with its default k
KNOBS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"fusion": "rrf"}, {}),
    ({"lexical_weight": 0.2}, {}),
    ({"semantic_weight": 0.2}, {}),
    ({"fusion": "rrf", "rrf_k": 1}, {"fusion": "rrf"}),
]


def ranked(server: HttpServer, options: dict[str, Any]) -> tuple[list[int], dict[str, Any]]:
    data = mcp_search(
        server.mcp_url,
        {
            "query": QUERY,
            "limit": LIMIT,
            "filters": {"collection": KB_COLLECTION},
            "explain": True,
            "max_tokens": 25000,
            **options,
        },
    )
    return [h["chunk_id"] for h in data["results"]], data


@pytest.mark.parametrize(("knob", "against"), KNOBS, ids=lambda o: json.dumps(o))
def test_each_knob_reorders_as_mcp_rest_and_sql_do(
    kb_http: HttpServer, kb: KnowledgeBase, knob: dict[str, Any], against: dict[str, Any]
) -> None:
    before, _ = ranked(kb_http, against)
    after, data = ranked(kb_http, knob)
    assert len(after) == LIMIT and after != before, knob
    rest = rest_search(
        kb_http.base,
        {"q": QUERY, "limit": LIMIT, "max_tokens": 25000, "collection": KB_COLLECTION, **knob},
    )
    assert rest.status_code == 200, rest.text
    assert [h["chunk_id"] for h in rest.json()["results"]] == after
    assert sql_order(kb.dsn, data["search_id"], knob) == after
    # each hit's explain shows what it ranked with
    explain = data["results"][0]["explain"]
    for name, value in knob.items():
        assert explain[name] == value, (name, explain)
    # logged: pgrag.explain_search, what "Copy as SQL" runs, replays the same order
    with psycopg.connect(kb.dsn) as conn:
        replay = conn.execute(
            "SELECT chunk_id FROM pgrag.explain_search(%s) ORDER BY rank", (data["search_id"],)
        ).fetchall()
    assert [r[0] for r in replay] == after


def test_limiting_to_chosen_documents_ranks_as_sql_does(
    kb_http: HttpServer, kb: KnowledgeBase
) -> None:
    everything, _ = ranked(kb_http, {})
    with psycopg.connect(kb.dsn) as conn:
        docs = sorted(
            {
                str(r[0])
                for r in conn.execute(
                    "SELECT document_id FROM pgrag.chunks WHERE id = ANY(%s)", (everything[:4],)
                )
            }
        )
    chosen = docs[:2]
    data = mcp_search(
        kb_http.mcp_url,
        {"query": QUERY, "limit": LIMIT, "max_tokens": 25000,
         "filters": {"collection": KB_COLLECTION, "document_ids": chosen}},
    )  # fmt: skip
    got = [h["chunk_id"] for h in data["results"]]
    assert got and {h["document_id"] for h in data["results"]} <= set(chosen)
    filters = json.dumps({"document_ids": chosen})
    assert sql_order(kb.dsn, data["search_id"], {}, filters) == got


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"fusion": "borda"}, "fusion"),
        ({"rrf_k": 0}, "rrf_k"),
        ({"rrf_k": 100000}, "rrf_k"),
        ({"lexical_weight": -1}, "lexical_weight"),
        ({"semantic_weight": 11}, "semantic_weight"),
        ({"lexical_weight": 0, "semantic_weight": 0}, "semantic_weight"),
    ],
)
def test_a_knob_out_of_bounds_is_a_clear_error(
    kb_http: HttpServer, params: dict[str, Any], field: str
) -> None:
    got = rest_search(kb_http.base, {"q": QUERY, **params})
    assert got.status_code == 400, got.text
    body = got.json()
    assert body["errorCode"] == "INVALID_ARGUMENT" and field in body["errorMessage"], body


def test_the_cli_takes_the_knobs_and_ranks_as_mcp_does(
    kb_http: HttpServer, kb: KnowledgeBase
) -> None:
    knob = {"fusion": "rrf", "rrf_k": 1}
    want, _ = ranked(kb_http, knob)
    args = ["search", QUERY, "-c", KB_COLLECTION, "-n", str(LIMIT), "--max-tokens", "25000"]
    done = subprocess.run(
        pgrag_cmd("--database-url", kb.dsn, *args, "--fusion", "rrf", "--rrf-k", "1", "--json"),
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(),
    )
    assert done.returncode == 0, done.stderr
    assert [h["chunk_id"] for h in json.loads(done.stdout)["results"]] == want
