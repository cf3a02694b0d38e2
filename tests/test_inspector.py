"""An external MCP client: the official MCP Inspector CLI (npm, pinned in tests/js) lists
the tools and calls `search` against `pgrag serve`, over stdio and over Streamable HTTP with
a bearer key. What our Python-client tests cannot show: a client we did not write, in
another language, reads our schemas and results. `.ci/run` installs it (`npm ci` in
tests/js); scripts/inspector_smoke.sh does the same by hand against any database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.kb_server import (
    CORE_TOOLS,
    FULL_KEY,
    OTHER_PATH,
    SCOPED_KEY,
    HttpServer,
    KnowledgeBase,
    child_env,
)
from tests.support.prerequisites import INSPECTOR, NODE22

pytest_plugins = ("tests.support.kb_server",)
pytestmark = pytest.mark.requires("tests/js")

Q1_SEARCH = [
    "--method",
    "tools/call",
    "--tool-name",
    "search",
    "--tool-arg",
    "query=financial performance Q1",
    "mode=semantic",
    "scope=documents",
    "content_mode=none",
    "limit=5",
]


def inspector(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    if not INSPECTOR.is_file():
        pytest.fail(
            f"the Inspector test needs {INSPECTOR}: run `npm --prefix tests/js ci` (.ci/run does)"
        )
    # the Inspector keeps a catalog of servers; never the user's own. It needs Node >= 22:
    # the one npm installed, for it and for any node it starts
    env = child_env(MCP_CATALOG_PATH=str(tmp / "catalog.json"), NO_COLOR="1")
    env["PATH"] = f"{NODE22.parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [str(NODE22), str(INSPECTOR.resolve()), "--cli", *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=tmp,
    )


def answer(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return json.loads(done.stdout)


def stdio(kb: KnowledgeBase, *args: str, tmp: Path) -> dict[str, Any]:
    # settings as environment variables: no pgrag flag can be taken for an Inspector option
    server = ["-e", f"PGRAG_DATABASE_URL={kb.dsn}", sys.executable, "-m", "pgrag", "serve"]
    return answer(inspector(*server, *args, tmp=tmp))


def http(server: HttpServer, key: str | None, *args: str, tmp: Path) -> subprocess.CompletedProcess:
    auth = ["--header", f"Authorization: Bearer {key}"] if key else []
    return inspector(server.mcp_url, "--transport", "http", *auth, *args, tmp=tmp)


def q1_names(result: dict[str, Any]) -> list[str]:
    assert result["isError"] is False, result
    return [r["name"] for r in result["structuredContent"]["data"]["results"]]


def test_the_inspector_lists_the_tools_and_searches_over_stdio(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    tools = {t["name"]: t for t in stdio(kb, "--method", "tools/list", tmp=tmp_path)["tools"]}
    assert tools.keys() >= CORE_TOOLS
    assert tools["search"]["inputSchema"]["required"] == ["query"]
    assert "$ref" not in json.dumps(tools["search"]["outputSchema"])

    result = stdio(kb, *Q1_SEARCH, tmp=tmp_path)
    assert set(q1_names(result)[:2]) == {"Q1_Budget.xlsx", "Q1_Report.pdf"}
    # the text block carries the same envelope for clients that ignore structured content
    text = json.loads(result["content"][0]["text"])
    assert [r["name"] for r in text["data"]["results"]] == q1_names(result)

    templates = stdio(kb, "--method", "resources/templates/list", tmp=tmp_path)
    uris = {t["uriTemplate"] for t in templates["resourceTemplates"]}
    assert "pgrag://documents/{document_id}" in uris


def test_the_inspector_searches_over_http_with_a_bearer_key(
    kb_http: HttpServer, tmp_path: Path
) -> None:
    assert set(q1_names(answer(http(kb_http, FULL_KEY, *Q1_SEARCH, tmp=tmp_path)))[:2]) == {
        "Q1_Budget.xlsx",
        "Q1_Report.pdf",
    }
    # a key limited to another collection: the Q1 documents are not there to find, its own
    # note is (by keyword: that collection is embedded with another model)
    assert q1_names(answer(http(kb_http, SCOPED_KEY, *Q1_SEARCH, tmp=tmp_path))) == []
    heron = ["--method", "tools/call", "--tool-name", "search"]
    heron += ["--tool-arg", "query=heron Lisbon offsite", "mode=keyword"]
    assert q1_names(answer(http(kb_http, SCOPED_KEY, *heron, tmp=tmp_path))) == [
        Path(OTHER_PATH).name
    ]
    # no key: the server answers 401 and the Inspector reads it as "authorization needed"
    refused = http(kb_http, None, "--method", "tools/list", tmp=tmp_path)
    assert refused.returncode != 0 and not refused.stdout
    assert json.loads(refused.stderr)["error"]["code"] == "auth_required"
