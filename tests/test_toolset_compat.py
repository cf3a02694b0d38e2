"""The compatibility toolsets through a real MCP client: `ldims` (seeds 000 + 003:
searchDocuments and the extracted_content resource) and `rag` (seed 001: rag_search,
list_documents, get_document), with their exact schemas and response shapes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.mcp.server import build_server
from pgrag.settings import load_settings
from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database

pytestmark = pytest.mark.anyio

HASH = "hash/384"
CONTRACT = (
    """# 合同管理制度

合同签署流程：合同由法务部审核后签署。The contract signing process starts with a legal review.

Unrelated filler about the cafeteria menu and the parking rules of the building. """
    + ("The parking garage opens at seven and closes at nine. " * 20)
    + """

## 归档

合同归档要求：签署后的合同在三日内归档。Signed contracts are archived within three days.
"""
)
NOTES = "Quarterly sales strategy for the northern region. Contract renewals rise in spring.\n"
BIG = "\n\n".join(
    f"Section {n}. The lighthouse keeper logs the weather, the ships and the lamp oil. " * 6
    for n in range(1, 40)
)
LDIMS_INPUT = {
    "query",
    "maxResults",
    "filters",
    "content_mode",
    "context_chars",
    "merge_overlapping",
    "return_scoring_details",
}
LDIMS_RESULT_KEYS = {
    "documentId",
    "documentName",
    "relevanceScore",
    "matchedContext",
    "metadata",
    "snippets",
    "fileDetails",
    "totalMatches",
}
SNIPPET_KEYS = {
    "content",
    "file_id",
    "file_name",
    "keywords_matched",
    "original_char_start",
    "original_char_end",
    "relevance_score",
}


def query(dsn: str, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchall()


async def ingest_corpus(dsn: str, root: Path) -> dict[str, str]:
    """contract.md, notes.txt, big.txt → {path: document_id}; notes.txt has a submitter."""
    root.mkdir(exist_ok=True)
    (root / "contract.md").write_text(CONTRACT, encoding="utf-8")
    (root / "notes.txt").write_text(NOTES, encoding="utf-8")
    (root / "big.txt").write_text(BIG, encoding="utf-8")
    async with open_database(load_settings(embedding_model=HASH), dsn=dsn, max_size=2) as db:
        await Ingestor(db.pool, HashEmbedder(HASH)).run([root])
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE pgrag.documents SET submitter = 'Kim' WHERE path = 'notes.txt'")
    return dict(query(dsn, "SELECT path, id::text FROM pgrag.documents"))


@dataclass
class Corpus:
    dsn: str
    ids: dict[str, str]  # path -> document_id


@pytest.fixture(scope="module")
def corpus(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Corpus]:
    """The corpus ingested once into its own database; the tests using it only read."""
    dsn = create_database(server_dsn)
    ids = asyncio.run(ingest_corpus(dsn, tmp_path_factory.mktemp("corpus")))
    yield Corpus(dsn, ids)
    drop_database(server_dsn, dsn)


@contextlib.asynccontextmanager
async def connect(
    dsn: str, toolsets: str = "core,ldims", **overrides: Any
) -> AsyncIterator[Client]:
    settings = load_settings(database_url=dsn, embedding_model=HASH, toolsets=toolsets, **overrides)
    async with Client(build_server(settings), raise_exceptions=True) as client:
        yield client


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    body = result.structured_content
    assert body is not None
    assert json.loads(result.content[0].text) == body  # type: ignore[union-attr]
    if result.is_error:
        assert body["isError"] is True and body["errorCode"]
    return body


def int_id(document_id: str) -> int:
    return int(UUID(document_id).hex[:13], 16)


# ------------------------------------------------------------------------------- ldims


async def test_search_documents_input_schema_is_ldims(dsn: str) -> None:
    async with connect(dsn) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        templates = [
            t.uri_template for t in (await client.list_resource_templates()).resource_templates
        ]
    tool = tools["searchDocuments"]
    schema = tool.input_schema
    assert set(schema["properties"]) == LDIMS_INPUT
    assert schema["required"] == ["query"]
    props = schema["properties"]
    assert props["query"]["type"] == "string"
    assert props["maxResults"]["default"] == 5 and props["maxResults"]["type"] == "integer"
    assert props["content_mode"]["anyOf"][0]["enum"] == ["full", "smart_extract"]
    assert props["context_chars"]["default"] == 400
    assert props["merge_overlapping"]["default"] is True
    assert props["return_scoring_details"]["default"] is False
    filters = schema["$defs"][props["filters"]["anyOf"][0]["$ref"].split("/")[-1]]
    assert set(filters["properties"]) == {
        "dateFrom",
        "dateTo",
        "documentType",
        "submitter",
        "searchMode",
    }
    assert filters["properties"]["searchMode"]["enum"] == ["exact", "semantic"]
    assert filters["properties"]["searchMode"]["default"] == "semantic"
    assert "not pgrag's envelope" in (tool.description or "")
    assert set(tool.output_schema["properties"]) == {"results", "totalMatches", "searchMetadata"}
    assert "ldims://docs/{document_id}/extracted_content" in templates


async def test_search_documents_response_shape(corpus: Corpus) -> None:
    dsn, ids = corpus.dsn, corpus.ids
    async with connect(dsn) as client:
        body = await call(client, "searchDocuments", {"query": "合同签署 contract signing"})
    assert set(body) == {"results", "totalMatches", "searchMetadata"}  # not the envelope
    results = body["results"]
    assert results and body["totalMatches"] >= len(results)
    top = results[0]
    assert top["documentId"] == ids["contract.md"]
    assert set(top) >= LDIMS_RESULT_KEYS
    assert top["documentName"] == "contract.md"
    assert top["metadata"]["documentType"] == "md" and top["metadata"]["createdAt"]
    assert top["fileDetails"] == [
        {
            "fileId": top["documentId"],
            "fileName": "contract.md",
            "fileType": "md",
            "fileSize": len(CONTRACT.encode()),
            "path": "contract.md",
            "processingStatus": "ready",
        }
    ]
    assert top["snippets"] and top["totalMatches"] == len(top["snippets"])
    for r in results:
        for s in r["snippets"]:
            assert set(s) == SNIPPET_KEYS  # no scoring_details unless asked
            assert s["file_id"] == r["documentId"] and s["file_name"] == r["documentName"]
    assert all(s["keywords_matched"] for s in top["snippets"])
    for r in results:
        best = max((s["relevance_score"] for s in r["snippets"]), default=0.0)
        assert r["relevanceScore"] == best  # seed 003 §十
    # pgrag's ranking order: the document matching every keyword first, although a short
    # text with one keyword at its start has the higher snippet score
    assert [r["rank"] for r in results] == list(range(1, len(results) + 1))
    notes = next(r for r in results if r["documentId"] == ids["notes.txt"])
    assert notes["rank"] > top["rank"] and notes["relevanceScore"] > top["relevanceScore"]
    # snippets cut the parking filler away; matchedContext is their summary
    assert all(s["content"].count("parking garage") < 20 for s in top["snippets"])
    assert all(len(s["content"]) < len(CONTRACT) / 2 for s in top["snippets"])
    assert "合同" in top["matchedContext"]
    meta = body["searchMetadata"]
    assert meta["searchMode"] == "semantic" and meta["engineMode"] == "hybrid"
    assert meta["executionTime"].endswith("s") and meta["contentMode"] == "smart_extract"


async def test_search_documents_options_and_filters(corpus: Corpus) -> None:
    dsn, ids = corpus.dsn, corpus.ids
    async with connect(dsn) as client:
        detailed = await call(
            client,
            "searchDocuments",
            {"query": "contract archived", "return_scoring_details": True, "maxResults": 1},
        )
        assert len(detailed["results"]) == 1
        details = detailed["results"][0]["snippets"][0]["scoring_details"]
        assert set(details) == {"unique_keywords", "total_keywords", "span", "percent_in_doc"}

        full = await call(client, "searchDocuments", {"query": "archived", "content_mode": "full"})
        top = full["results"][0]
        assert top["snippets"] == [] and top["relevanceScore"] == 0.0
        assert "Signed contracts are archived" in top["matchedContext"]
        assert full["searchMetadata"]["contentMode"] == "full"

        exact = await call(
            client,
            "searchDocuments",
            {"query": "renewals", "filters": {"searchMode": "exact"}},
        )
        assert exact["searchMetadata"]["engineMode"] == "keyword"
        assert [r["documentId"] for r in exact["results"]] == [ids["notes.txt"]]

        txt = await call(
            client,
            "searchDocuments",
            {"query": "contract", "filters": {"documentType": "txt"}, "maxResults": 10},
        )
        assert {r["documentName"] for r in txt["results"]} <= {"notes.txt", "big.txt"}
        by_submitter = await call(
            client, "searchDocuments", {"query": "contract", "filters": {"submitter": "Kim"}}
        )
        assert [r["documentId"] for r in by_submitter["results"]] == [ids["notes.txt"]]
        assert by_submitter["results"][0]["metadata"]["submitter"] == "Kim"
        future = await call(
            client, "searchDocuments", {"query": "contract", "filters": {"dateFrom": "2999-01-01"}}
        )
        assert future["results"] == [] and future["totalMatches"] == 0

        bad = await client.call_tool(
            "searchDocuments", {"query": "contract", "filters": {"dateTo": "next tuesday"}}
        )
        assert bad.is_error
        assert bad.structured_content["errorCode"] == "INVALID_ARGUMENT"
        assert "filters.dateTo" in bad.structured_content["errorMessage"]


async def test_matched_context_follows_the_summary_setting(corpus: Corpus) -> None:
    dsn = corpus.dsn
    args = {"query": "合同归档", "maxResults": 1}
    async with connect(dsn, return_snippet_summary=True) as client:
        on = (await call(client, "searchDocuments", args))["results"][0]
    async with connect(dsn, return_snippet_summary=False) as client:
        off = (await call(client, "searchDocuments", args))["results"][0]
    assert on["snippets"] and off["snippets"]
    assert "归档" in on["matchedContext"]
    assert off["matchedContext"] == ""


async def test_extracted_content_resource(dsn: str, tmp_path: Path) -> None:
    doc_id = (await ingest_corpus(dsn, tmp_path / "corpus"))["contract.md"]
    async with connect(dsn, toolsets="ldims") as client:
        uri = f"ldims://docs/{doc_id}/extracted_content"
        read = await client.read_resource(uri)
        content = read.contents[0]
        assert content.uri == uri and content.mime_type == "text/plain"
        assert "合同签署流程" in content.text and "Signed contracts are archived" in content.text
        core = await client.read_resource(f"pgrag://documents/{doc_id}/content")
        assert content.text == core.contents[0].text
        assert content.meta is not None
        assert content.meta["documentName"] == "contract.md"
        assert content.meta["format"] == "md" and content.meta["extractedAt"]

        missing = f"ldims://docs/{uuid4()}/extracted_content"
        with pytest.raises(MCPError) as exc:
            await client.read_resource(missing)
        assert exc.value.data["errorCode"] == "RESOURCE_NOT_FOUND"
        assert exc.value.data["isError"] is True and exc.value.data["code"] == "NOT_FOUND"

        query_status = "UPDATE pgrag.documents SET status = %s, error_code = %s WHERE id = %s"
        with psycopg.connect(dsn) as conn:
            conn.execute(query_status, ("processing", None, doc_id))
        with pytest.raises(MCPError) as exc:
            await client.read_resource(uri)
        assert exc.value.data["errorCode"] == "PROCESSING"
        assert exc.value.data["status"] == "processing"

        with psycopg.connect(dsn) as conn:
            conn.execute(query_status, ("failed", "CORRUPT_FILE", doc_id))
        with pytest.raises(MCPError) as exc:
            await client.read_resource(uri)
        assert exc.value.data["errorCode"] == "CONTENT_UNAVAILABLE_OR_FAILED"
        assert exc.value.data["code"] == "CONTENT_UNAVAILABLE"


async def test_ldims_and_write_over_stdio(dsn: str) -> None:
    """The real transport and the --toolsets flag: a note saved with `write` is found by
    `searchDocuments`."""
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "pgrag",
            "--database-url",
            dsn,
            "--embedding-model",
            HASH,
            "--toolsets",
            "core,write,ldims",
            "serve",
        ],
    )
    async with Client(params, read_timeout_seconds=60) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"search", "save_document", "searchDocuments"} <= names
        saved = await client.call_tool(
            "save_document", {"topic": "Capybara", "content": "Capybaras enjoy hot springs."}
        )
        assert not saved.is_error, saved.content
        doc_id = saved.structured_content["data"]["document_id"]
        found = await client.call_tool("searchDocuments", {"query": "capybaras hot springs"})
        assert not found.is_error
        assert found.structured_content["results"][0]["documentId"] == doc_id


# ------------------------------------------------------------------------------- rag


async def test_rag_schemas_are_seed_001(dsn: str) -> None:
    async with connect(dsn, toolsets="rag") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"rag_search", "list_documents", "get_document"}
    schema = tools["rag_search"].input_schema
    assert set(schema["properties"]) == {"query", "limit", "threshold", "document_ids"}
    assert schema["required"] == ["query"]
    p = schema["properties"]
    assert p["query"]["type"] == "string" and p["query"]["description"] == "Search query"
    assert (
        p["limit"]["type"],
        p["limit"]["default"],
        p["limit"]["minimum"],
        p["limit"]["maximum"],
    ) == (
        "integer",
        5,
        1,
        50,
    )
    assert (p["threshold"]["type"], p["threshold"]["default"]) == ("number", 0.7)
    assert (p["threshold"]["minimum"], p["threshold"]["maximum"]) == (0.0, 1.0)
    assert p["document_ids"]["type"] == "array" and p["document_ids"]["items"] == {
        "type": "integer"
    }
    assert tools["get_document"].input_schema["required"] == ["document_id"]
    assert "required" not in tools["list_documents"].input_schema


async def test_rag_search_response_shape(corpus: Corpus) -> None:
    dsn, ids = corpus.dsn, corpus.ids
    async with connect(dsn, toolsets="rag") as client:
        body = await call(
            client, "rag_search", {"query": "contract signing legal review", "threshold": 0.0}
        )
        assert set(body) == {"results", "total_results", "query_time_ms"}
        assert isinstance(body["query_time_ms"], int) and isinstance(body["total_results"], int)
        results = body["results"]
        assert 0 < len(results) <= 5
        for r in results:
            assert set(r) == {
                "chunk_id",
                "document_id",
                "document_name",
                "content",
                "similarity_score",
                "chunk_index",
                "document_uuid",
            }
            assert isinstance(r["chunk_id"], int) and isinstance(r["document_id"], int)
            assert r["document_id"] == int_id(r["document_uuid"])
            content, ordinal = query(
                dsn, "SELECT content, ordinal FROM pgrag.chunks WHERE id = %s", (r["chunk_id"],)
            )[0]
            assert r["content"] == content and r["chunk_index"] == ordinal - 1
        sims = [r["similarity_score"] for r in results]
        assert sims == sorted(sims, reverse=True) and all(-1.0 <= s <= 1.0 for s in sims)
        assert results[0]["document_uuid"] == ids["contract.md"]

        strict = await call(client, "rag_search", {"query": "contract signing", "threshold": 0.99})
        assert strict["results"] == []  # threshold is the minimum cosine similarity
        assert all(
            r["similarity_score"] >= 0.1
            for r in (
                await call(client, "rag_search", {"query": "contract signing", "threshold": 0.1})
            )["results"]
        )

        notes = int_id(ids["notes.txt"])
        only = await call(
            client,
            "rag_search",
            {"query": "contract", "threshold": 0.0, "document_ids": [notes], "limit": 50},
        )
        assert only["results"] and {r["document_id"] for r in only["results"]} == {notes}
        unknown = await call(
            client, "rag_search", {"query": "contract", "threshold": 0.0, "document_ids": [7]}
        )
        assert unknown["results"] == []


async def test_rag_list_and_get_document(corpus: Corpus) -> None:
    dsn, ids = corpus.dsn, corpus.ids
    async with connect(dsn, toolsets="rag") as client:
        listed = await call(client, "list_documents", {})
        docs = {d["filename"]: d for d in listed["documents"]}
        assert set(docs) == {"contract.md", "notes.txt", "big.txt"}
        assert listed["total"] == 3 and listed["next_offset"] is None
        for name, d in docs.items():
            assert {"id", "filename", "file_type", "file_size", "chunk_count", "created_at"} <= set(
                d
            )
            assert d["id"] == int_id(ids[name]) and d["uuid"] == ids[name]
            chunks = query(
                dsn, "SELECT count(*) FROM pgrag.chunks WHERE document_id = %s", (ids[name],)
            )[0][0]
            assert d["chunk_count"] == chunks
        assert docs["notes.txt"]["file_type"] == "txt"
        assert docs["notes.txt"]["file_size"] == len(NOTES.encode())
        page = await call(client, "list_documents", {"limit": 2})
        assert len(page["documents"]) == 2 and page["next_offset"] == 2
        past = await call(client, "list_documents", {"offset": 10})
        assert past == {"documents": [], "total": 3, "next_offset": None}

        got = await call(client, "get_document", {"document_id": docs["contract.md"]["id"]})
        doc = got["document"]
        assert {"id", "filename", "file_type", "content", "metadata", "chunks"} <= set(doc)
        assert doc["id"] == docs["contract.md"]["id"] and doc["filename"] == "contract.md"
        assert "合同签署流程" in doc["content"] and doc["content_truncated"] is False
        assert doc["metadata"]["path"] == "contract.md"
        assert [c["chunk_index"] for c in doc["chunks"]] == list(range(len(doc["chunks"])))
        assert all(set(c) == {"id", "chunk_index", "content"} for c in doc["chunks"])
        by_uuid = await call(client, "get_document", {"document_id": ids["contract.md"]})
        assert by_uuid["document"]["id"] == doc["id"]

        # a large document comes cut to the budget, its chunks in pages
        big = (await call(client, "get_document", {"document_id": "big.txt", "max_tokens": 500}))[
            "document"
        ]
        assert big["content_truncated"] is True and big["next_chunk_offset"] is not None
        rest = (
            await call(
                client,
                "get_document",
                {
                    "document_id": "big.txt",
                    "max_tokens": 10000,
                    "chunk_offset": big["next_chunk_offset"],
                },
            )
        )["document"]
        seen = [c["chunk_index"] for c in big["chunks"] + rest["chunks"]]
        assert seen == list(range(big["total_chunks"]))

        missing = await call(client, "get_document", {"document_id": 12345})
        assert missing["errorCode"] == "NOT_FOUND"
    # compatibility tools are audited like the others, with their outcome code
    audited = query(
        dsn,
        "SELECT outcome, arguments FROM pgrag.audit_log WHERE tool = 'get_document'"
        " ORDER BY id DESC LIMIT 1",
    )[0]
    assert audited == ("NOT_FOUND", {"document_id": 12345, "max_tokens": 8000, "chunk_offset": 0})


def test_core_and_rag_together_is_a_start_up_error(dsn: str) -> None:
    done = subprocess.run(
        pgrag_cmd(
            "--database-url", dsn, "--embedding-model", HASH, "--toolsets", "core,rag", "serve"
        ),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode == 2
    assert "list_documents" in done.stderr and "core and rag" in done.stderr
    assert "Traceback" not in done.stderr
