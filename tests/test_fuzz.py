"""Property-based fuzzing: hostile inputs end as a stable error code, never a crash.

Profiles: `ci` (default, a few hundred inputs in total) and `nightly`
(`HYPOTHESIS_PROFILE=nightly`, over 10,000 inputs across the suite).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import os
import string
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from pgrag.errors import ErrorCode, InvalidArgument, PgragError
from pgrag.paging import ContinuationCodec
from pgrag.search.keywords import (
    extract_keywords,
    find_matches,
    find_regex_matches,
    to_postgres_regex,
)
from pgrag.search.models import SearchRequest
from pgrag.services.ranges import parse_cell_range, parse_number_list
from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database
from tests.support.servers import free_port, wait_http

STABLE_CODES = {str(c) for c in ErrorCode}
CRASH = str(ErrorCode.INTERNAL)  # a stable code too, but it means an unhandled exception
FUZZED_TOOLSETS = "core,write,graph,ldims,chart"
CODEC = ContinuationCodec(b"fuzz-secret")
_HOSTILE_ANY = st.one_of(
    st.text(),
    st.text(alphabet=string.printable),
    st.sampled_from(
        [
            "'; DROP TABLE pgrag.chunks; --",
            "%' OR 1=1 --",
            "\\",
            "\x00",
            "((((",
            "a" * 5000,
            "合同签署流程",
            "../../etc/passwd",
            "$(rm -rf /)",
            "{{7*7}}",
            "\u202e",
            "\ud800",
        ]
    ),
)
# what a client can send at all: no lone surrogates (UTF-8 cannot encode them)
HOSTILE = _HOSTILE_ANY.filter(lambda s: "\ud800" not in s)


@given(st.text())
def test_continuation_decoder_rejects_garbage_with_invalid_argument(token: str) -> None:
    with pytest.raises(InvalidArgument):
        CODEC.decode(token, "search", "fp")


@given(st.integers(min_value=0, max_value=200), st.characters())
def test_any_single_character_change_to_a_token_is_detected(position: int, ch: str) -> None:
    token = CODEC.encode("search", "fp", {"o": 10})
    i = position % len(token)
    tampered = token[:i] + ch + token[i + 1 :]
    if tampered == token:
        return
    try:
        state = CODEC.decode(tampered, "search", "fp")
    except InvalidArgument:
        return
    assert state == {"o": 10}  # only a change base64 decoding ignores may pass


@given(
    st.dictionaries(
        st.text(max_size=30),
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers()
            | st.floats(allow_nan=True)
            | st.text(max_size=200),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(st.text(max_size=10), inner, max_size=4)
            ),
            max_leaves=10,
        ),
        max_size=8,
    )
)
def test_search_request_model_accepts_or_rejects_cleanly(payload: dict[str, Any]) -> None:
    try:
        req = SearchRequest.model_validate(payload)
    except ValidationError:
        return
    assert 1 <= req.limit <= 50 and req.query.strip()


@given(_HOSTILE_ANY, st.integers(min_value=0, max_value=100_000))
def test_range_parsers_never_crash(text: str, upper: int) -> None:
    for parse in (lambda t: parse_number_list(t, "page_range", upper), parse_cell_range):
        try:
            result = parse(text)
        except InvalidArgument:
            continue
        if isinstance(result, list):
            assert all(1 <= n <= upper for n in result)


@given(_HOSTILE_ANY, _HOSTILE_ANY)
def test_keyword_and_regex_matching_never_crash(query: str, text: str) -> None:
    for m in find_matches(text, extract_keywords(query)):
        assert 0 <= m.start < m.end <= len(text)
    for m in find_regex_matches(text, query):
        assert 0 <= m.start < m.end <= len(text)
    assert isinstance(to_postgres_regex(query), str)


# -- against a real server ---------------------------------------------------------------


@pytest.fixture(scope="module")
def live(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    dsn = create_database(server_dsn)
    docs: Path = tmp_path_factory.mktemp("fuzzdocs")
    (docs / "a.md").write_text(
        "# Contracts\n\nContracts are signed by two directors.\n", encoding="utf-8"
    )
    (docs / "b.csv").write_text("name,amount\nwidget,10\n", encoding="utf-8")
    model = ["--embedding-model", "hash/384"]
    subprocess.run(
        pgrag_cmd("--database-url", dsn, *model, "ingest", "-q", str(docs)),
        check=True,
        capture_output=True,
        timeout=120,
    )
    port = free_port()
    proc = subprocess.Popen(
        pgrag_cmd(
            "--database-url", dsn, *model, "serve", "--transport", "http", "--port", str(port)
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # every toolset that needs no outside service, writable: all their inputs get fuzzed
        env={**os.environ, "PGRAG_TOOLSETS": FUZZED_TOOLSETS, "PGRAG_READ_ONLY": "false"},
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/readyz", timeout=90)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        drop_database(server_dsn, dsn)


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


QUERY_PARAMS = st.dictionaries(
    st.sampled_from(
        [
            "q",
            "mode",
            "limit",
            "scope",
            "folder",
            "file_type",
            "collection",
            "max_tokens",
            "continuation_token",
            "status",
            "offset",
            "document",
        ]
    ),
    HOSTILE,
    max_size=5,
)


@given(st.sampled_from(["/api/search", "/api/documents", "/api/status"]), QUERY_PARAMS)
def test_rest_answers_every_input_with_a_stable_error_or_success(
    live: str, path: str, params: dict[str, str]
) -> None:
    status, body = _get(live + path + "?" + urllib.parse.urlencode(params))
    assert status < 500 or status == 503, body[:300]
    if status >= 400:
        err = json.loads(body)
        assert err["isError"] is True and err["errorCode"] in STABLE_CODES


@given(HOSTILE)
def test_rest_document_ids_are_handled(live: str, ref: str) -> None:
    for suffix in ("", "/content"):
        status, body = _get(live + "/api/documents/" + urllib.parse.quote(ref, safe="") + suffix)
        assert status in (200, 202, 400, 404, 409), body[:300]


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "query",
                "mode",
                "scope",
                "limit",
                "threshold",
                "filters",
                "content_mode",
                "context_chars",
                "max_tokens",
                "continuation_token",
                "explain",
            ]
        ),
        st.one_of(
            HOSTILE,
            st.integers(),
            st.floats(allow_nan=True),
            st.booleans(),
            st.none(),
            st.lists(st.text(max_size=5), max_size=3),
        ),
        max_size=6,
    )
)
def test_the_search_tool_answers_every_input_with_an_envelope(
    live: str, args: dict[str, Any]
) -> None:
    from mcp import Client

    async def call() -> Any:
        async with Client(live + "/mcp") as client:
            return await client.call_tool("search", args)

    result = asyncio.run(call())
    env = result.structured_content
    assert env is not None and "ok" in env
    if not env["ok"]:
        assert result.is_error and env["error"]["code"] in STABLE_CODES - {CRASH}


@pytest.fixture(scope="module")
def session(live: str) -> Iterator[tuple[BlockingPortal, Any, dict[str, Any]]]:
    """One MCP session for all examples (an event loop in a thread): thousands of calls
    without a handshake each. Yields the portal, the client and the listed tools."""
    from mcp import Client

    with ExitStack() as stack:
        portal = stack.enter_context(start_blocking_portal())
        client = stack.enter_context(portal.wrap_async_context_manager(Client(live + "/mcp")))
        tools = {t.name: t for t in portal.call(client.list_tools).tools}
        yield portal, client, tools


@functools.cache
def toolset_tools(name: str) -> frozenset[str]:
    """The tools a toolset registers (read from a throw-away server: metadata only)."""
    from mcp.server import MCPServer

    from pgrag.mcp.toolsets import MODULES

    server: MCPServer[Any] = MCPServer("toolset-probe")
    importlib.import_module(MODULES[name]).register(server)
    return frozenset(t.name for t in asyncio.run(server.list_tools()))


ANY_VALUE = st.recursive(
    st.one_of(
        HOSTILE,
        st.integers(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False),
        st.booleans(),
        st.none(),
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(HOSTILE, inner, max_size=3),
    max_leaves=6,
)


def test_every_fuzzed_toolset_is_listed(session: tuple[BlockingPortal, Any, dict]) -> None:
    listed = set(session[2])
    covered = set().union(*(toolset_tools(n) for n in FUZZED_TOOLSETS.split(",")))
    assert listed == covered, sorted(listed ^ covered)


@pytest.mark.parametrize("name", ["core", "write", "graph", "ldims", "chart"])
@given(data=st.data())
def test_every_tool_answers_any_arguments_with_an_envelope(
    session: tuple[BlockingPortal, Any, dict], name: str, data: st.DataObject
) -> None:
    """Arguments named after the tool's input schema (plus unknown ones), with hostile
    values of any type: an envelope comes back, ok or with a stable code, never a crash."""
    portal, client, tools = session
    listed = sorted(toolset_tools(name))
    assert set(listed) <= set(tools), name
    tool = data.draw(st.sampled_from(listed), label="tool")
    props = [*sorted(tools[tool].input_schema.get("properties", {})), "unknown_argument"]
    args = data.draw(st.dictionaries(st.sampled_from(props), ANY_VALUE, max_size=5), label="args")
    result = portal.call(client.call_tool, tool, args)
    env = result.structured_content
    assert env is not None and "ok" in env, (tool, args, result)
    if not env["ok"]:
        assert result.is_error and env["error"]["code"] in STABLE_CODES - {CRASH}, (tool, env)
    assert len(result.content[0].text.encode()) <= 200 * 1024


def test_pgrag_error_codes_are_the_stable_set() -> None:
    assert {
        "INVALID_ARGUMENT",
        "NOT_FOUND",
        "FORBIDDEN",
        "PROCESSING",
        "CONTENT_UNAVAILABLE",
        "DB_ERROR",
        "DB_SETUP",  # a version or privilege the database lacks (docs/existing-postgresql.md)
        "UPSTREAM_ERROR",
        "TIMEOUT",
        "RATE_LIMITED",
        "INTERNAL",
        # an ingested file's error_code
        "SYMLINK_OUTSIDE_ROOT",
        "SYMLINK_NOT_FOLLOWED",
        "NOT_REGULAR_FILE",
        "TOO_LARGE",
        "PARSER_CRASHED",
        "IO_ERROR",
        "UNSAFE_PERMISSIONS",  # PGRAG_HOME or an upload folder others can write to
        "INTERRUPTED",  # the process writing its version died
        # a file a parser cannot read
        "CORRUPT_FILE",
        "UNSUPPORTED_FORMAT",
        "EMPTY_FILE",
        "ENCODING_ERROR",
        "ENCRYPTED",
        "UNREADABLE",
        "OCR_UNAVAILABLE",
        # the host guard's 421
        "INVALID_HOST",
    } == STABLE_CODES
    assert PgragError("x").code == ErrorCode.INTERNAL
