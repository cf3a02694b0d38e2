"""The `write` toolset through a real MCP client (in-process, real PostgreSQL): saved
documents are chunked, embedded and found by `search` like files; updates re-chunk in one
transaction; deletes; find_documents; the content limit; read-only servers refuse; an
ingestion run never removes saved documents."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor, Outcome
from pgrag.mcp.server import build_server
from pgrag.settings import load_settings

pytestmark = pytest.mark.anyio

HASH = "hash/384"


@contextlib.asynccontextmanager
async def connect(dsn: str, **overrides: Any) -> AsyncIterator[Client]:
    settings = load_settings(
        database_url=dsn, embedding_model=HASH, toolsets="core,write", **overrides
    )
    async with Client(build_server(settings), raise_exceptions=True) as client:
        yield client


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    body = result.structured_content
    assert body is not None
    assert result.is_error == (not body["ok"])
    return body


async def ok(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    body = await call(client, tool, args)
    assert body["ok"], body["error"]
    return body["data"]  # type: ignore[no-any-return]


async def search_ids(client: Client, query: str, mode: str = "hybrid") -> list[str]:
    data = await ok(client, "search", {"query": query, "mode": mode, "limit": 20})
    return [r["document_id"] for r in data["results"]]


def query(dsn: str, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchall()


def long_text(word: str, paragraphs: int = 12) -> str:
    para = (
        f"The {word} report describes how the team measured throughput, latency and cost "
        "over several weeks of production traffic. Each section lists the assumptions, the "
        "method and the numbers, so that a reader can repeat the measurement later. "
    ) * 4
    return "\n\n".join(f"## Part {n}\n\n{para}" for n in range(1, paragraphs + 1))


def chunk_counts(dsn: str, doc_id: str) -> tuple[int, int, int]:
    """(chunks, embeddings, units) stored for a document."""
    row = query(
        dsn,
        "SELECT (SELECT count(*) FROM pgrag.chunks WHERE document_id = %(d)s),"
        " (SELECT count(*) FROM pgrag.embeddings e JOIN pgrag.chunks c ON c.id = e.chunk_id"
        "   WHERE c.document_id = %(d)s),"
        " (SELECT count(*) FROM pgrag.units WHERE document_id = %(d)s)",
        {"d": doc_id},
    )[0]
    return int(row[0]), int(row[1]), int(row[2])


async def test_saved_document_is_stored_like_a_file_and_searchable(dsn: str) -> None:
    async with connect(dsn) as client:
        saved = await call(
            client,
            "save_document",
            {
                "topic": "Bird migration notes",
                "content": "# Zebrafinch migration\n\nZebrafinches cross the Nullarbor in "
                "spring.\n\n## 路线\n\n斑胸草雀在春季迁徙。",
                "tags": ["birds", "field notes", "birds"],
                "source": {"type": "web", "url": "https://example.org/finch", "title": "Finch"},
                "folder": "notes/birds",
                "metadata": {"observer": "kim"},
            },
        )
        assert saved["ok"] and saved["status"]["message"] == "DOCUMENT_SAVED"
        data = saved["data"]
        doc_id = data["document_id"]
        assert data["path"].startswith("saved/notes/birds/bird-migration-notes-")
        assert data["path"].endswith(".md") and data["folder"] == "notes/birds"
        assert data["chunks"] >= 1

        # an ordinary document: source 'saved', ready, parsed as Markdown sections
        row = query(
            dsn,
            "SELECT source, status, file_type, folder, tags, metadata, title"
            " FROM pgrag.documents WHERE id = %s",
            (doc_id,),
        )[0]
        assert row[:4] == ("saved", "ready", "md", "saved/notes/birds")
        assert row[4] == ["birds", "field notes"]
        assert row[5]["source"]["url"] == "https://example.org/finch"
        assert row[5]["metadata"] == {"observer": "kim"}
        chunks, embeddings, units = chunk_counts(dsn, doc_id)
        assert chunks == data["chunks"] == embeddings and units >= 2

        assert doc_id in await search_ids(client, "zebrafinches Nullarbor")
        assert doc_id in await search_ids(client, "斑胸草雀", mode="keyword")
        hit = (await ok(client, "search", {"query": "Nullarbor", "mode": "keyword"}))["results"][0]
        assert hit["document_id"] == doc_id and hit["path"] == data["path"]
        outline = await ok(client, "get_document_outline", {"document_id": doc_id})
        assert [h["title"] for h in outline["outline"]["headings"]] == [
            "Zebrafinch migration",
            "路线",
        ]

        # the audit row keeps the call but not the content
        audited = query(dsn, "SELECT arguments FROM pgrag.audit_log WHERE tool = 'save_document'")[
            0
        ][0]
        assert audited["content"].startswith("<") and "Nullarbor" not in str(audited)


async def test_update_rechunks_and_reembeds_in_place(dsn: str) -> None:
    async with connect(dsn) as client:
        first = await ok(
            client,
            "save_document",
            {"title": "Quarterly aardvark review", "content": long_text("aardvark")},
        )
        doc_id = first["document_id"]
        assert first["chunks"] > 2
        assert chunk_counts(dsn, doc_id)[0] == first["chunks"]

        updated = await call(
            client,
            "update_document",
            {
                "document_id": doc_id,
                "patch": {
                    "title": "Quarterly pangolin review",
                    "content": long_text("pangolin", paragraphs=3),
                    "tags": ["q3"],
                    "folder": "reviews",
                },
            },
        )
        assert updated["ok"], updated["error"]
        data = updated["data"]
        assert data["updated"] is True and data["document_id"] == doc_id
        assert data["path"].startswith("saved/reviews/quarterly-pangolin-review-")
        assert data["path"].endswith(first["path"][-len("0123456789ab.md") :])  # same short id
        assert 0 < data["chunks"] < first["chunks"]
        chunks, embeddings, _ = chunk_counts(dsn, doc_id)
        assert chunks == embeddings == data["chunks"]  # no chunk of the old version left

        assert doc_id not in await search_ids(client, "aardvark", mode="keyword")
        assert doc_id in await search_ids(client, "pangolin", mode="keyword")
        assert query(dsn, "SELECT count(*) FROM pgrag.documents")[0][0] == 1
        row = query(dsn, "SELECT title, tags, folder FROM pgrag.documents WHERE id = %s", (doc_id,))
        assert row[0] == ("Quarterly pangolin review", ["q3"], "saved/reviews")

        # a patch without content keeps the text and re-chunks it under the new title
        retitled = await ok(
            client, "update_document", {"document_id": doc_id, "patch": {"title": "Pangolins"}}
        )
        assert retitled["chunks"] == data["chunks"]
        assert doc_id in await search_ids(client, "pangolin", mode="keyword")
        headings = query(
            dsn, "SELECT DISTINCT heading FROM pgrag.chunks WHERE document_id = %s", (doc_id,)
        )
        assert all(h[0].startswith("Pangolins") for h in headings)


async def test_a_failing_update_leaves_the_old_version_whole(dsn: str) -> None:
    """The update is one transaction: when the last statement fails, the old chunks,
    embeddings and path are all still there (fault injected by a real trigger)."""
    async with connect(dsn) as client:
        saved = await ok(
            client, "save_document", {"title": "Okapi notes", "content": long_text("okapi", 4)}
        )
        doc_id = saved["document_id"]
        before = chunk_counts(dsn, doc_id)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "CREATE FUNCTION pg_temp_explode() RETURNS trigger LANGUAGE plpgsql AS $$"
                " BEGIN IF NEW.title = 'explode' AND NEW.status = 'ready' THEN"
                " RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW; END $$"
            )
            conn.execute(
                "CREATE TRIGGER explode BEFORE UPDATE ON pgrag.documents"
                " FOR EACH ROW EXECUTE FUNCTION pg_temp_explode()"
            )
        failed = await call(
            client,
            "update_document",
            {
                "document_id": doc_id,
                "patch": {"title": "explode", "content": "# New\n\nsomething about tapirs"},
            },
        )
        assert not failed["ok"] and failed["error"]["code"] == "DB_ERROR"
        assert chunk_counts(dsn, doc_id) == before
        path = query(dsn, "SELECT path, title FROM pgrag.documents WHERE id = %s", (doc_id,))[0]
        assert path == (saved["path"], "Okapi notes")
        assert doc_id in await search_ids(client, "okapi", mode="keyword")
        assert doc_id not in await search_ids(client, "tapirs", mode="keyword")


async def test_delete_removes_document_chunks_and_embeddings(dsn: str, tmp_path: Path) -> None:
    (tmp_path / "file.md").write_text("# A file\n\nquokka habitat", encoding="utf-8")
    await _ingest(dsn, tmp_path)
    async with connect(dsn) as client:
        saved = await ok(client, "save_document", {"topic": "Quokka", "content": "quokka smiles"})
        doc_id = saved["document_id"]
        deleted = await ok(client, "delete_document", {"document_id": doc_id})
        assert deleted == {"deleted": True, "document_id": doc_id, "path": saved["path"]}
        assert chunk_counts(dsn, doc_id) == (0, 0, 0)
        assert query(dsn, "SELECT count(*) FROM pgrag.documents WHERE id = %s", (doc_id,)) == [(0,)]
        again = await call(client, "delete_document", {"document_id": doc_id})
        assert again["error"]["code"] == "NOT_FOUND"

        # ingested files are not the write toolset's to change
        file_id = query(dsn, "SELECT id::text FROM pgrag.documents WHERE path = 'file.md'")[0][0]
        refused = await call(client, "delete_document", {"document_id": file_id})
        assert refused["error"]["code"] == "FORBIDDEN"
        refused = await call(
            client, "update_document", {"document_id": "file.md", "patch": {"tags": ["x"]}}
        )
        assert refused["error"]["code"] == "FORBIDDEN"
        assert query(dsn, "SELECT count(*) FROM pgrag.documents")[0][0] == 1


async def test_find_documents_newest_first_by_topic_and_tags(dsn: str) -> None:
    async with connect(dsn) as client:
        ids = {}
        for topic, tags in (
            ("Alpha budget", ["finance"]),
            ("Beta roadmap", ["product"]),
            ("Gamma budget", ["finance", "product"]),
        ):
            saved = await ok(
                client,
                "save_document",
                {"topic": topic, "content": f"{topic} text body", "tags": tags},
            )
            ids[topic] = saved["document_id"]

        items = (await ok(client, "find_documents", {}))["items"]
        assert [i["document_id"] for i in items] == [
            ids["Gamma budget"],
            ids["Beta roadmap"],
            ids["Alpha budget"],
        ]
        assert items[0]["topic"] == "Gamma budget" and items[0]["content"] is None
        assert items[0]["preview"] == "Gamma budget text body"

        by_tag = (await ok(client, "find_documents", {"tags": ["finance"]}))["items"]
        assert [i["document_id"] for i in by_tag] == [ids["Gamma budget"], ids["Alpha budget"]]
        by_topic = (await ok(client, "find_documents", {"topic": "BUDGET", "limit": 1}))["items"]
        assert [i["document_id"] for i in by_topic] == [ids["Gamma budget"]]
        none = (await ok(client, "find_documents", {"topic": "100%_budget"}))["items"]
        assert none == []  # LIKE wildcards in the topic are literal
        full = await ok(client, "find_documents", {"topic": "beta", "include_content": True})
        assert full["items"][0]["content"] == "Beta roadmap text body"


async def test_content_over_the_limit_is_invalid(dsn: str) -> None:
    async with connect(dsn, write_max_chars=100) as client:
        too_long = await call(client, "save_document", {"topic": "Big", "content": "x" * 101})
        assert too_long["error"]["code"] == "INVALID_ARGUMENT"
        assert too_long["error"]["detail"]["max_chars"] == 100
        saved = await ok(client, "save_document", {"topic": "Small", "content": "y" * 100})
        patched = await call(
            client,
            "update_document",
            {"document_id": saved["document_id"], "patch": {"content": "z" * 101}},
        )
        assert patched["error"]["code"] == "INVALID_ARGUMENT"
        no_title = await call(client, "save_document", {"content": "text without a topic"})
        assert no_title["error"]["code"] == "INVALID_ARGUMENT"
        bad_folder = await call(
            client, "save_document", {"topic": "t", "content": "c", "folder": "../etc"}
        )
        assert bad_folder["error"]["code"] == "INVALID_ARGUMENT"
    assert query(dsn, "SELECT count(*) FROM pgrag.documents")[0][0] == 1


async def test_read_only_server_refuses_writes(dsn: str) -> None:
    async with connect(dsn) as client:
        saved = await ok(client, "save_document", {"topic": "Kept", "content": "kept text"})
    async with connect(dsn, read_only=True) as client:
        refused = await call(client, "save_document", {"topic": "No", "content": "no"})
        assert refused["error"]["code"] == "FORBIDDEN"
        assert "read-only" in refused["error"]["message"]
        for tool, args in (
            ("update_document", {"document_id": saved["document_id"], "patch": {"tags": ["a"]}}),
            ("delete_document", {"document_id": saved["document_id"]}),
        ):
            assert (await call(client, tool, args))["error"]["code"] == "FORBIDDEN"
        found = (await ok(client, "find_documents", {}))["items"]  # reading still works
        assert [i["document_id"] for i in found] == [saved["document_id"]]
    assert query(dsn, "SELECT tags FROM pgrag.documents")[0][0] == []


async def _ingest(dsn: str, folder: Path) -> dict[str, Outcome]:
    async with open_database(load_settings(embedding_model=HASH), dsn=dsn, max_size=2) as db:
        summary = await Ingestor(db.pool, HashEmbedder(HASH)).run([folder])
    return {r.path: r.outcome for r in summary.results}


async def test_ingestion_never_removes_saved_documents(dsn: str, tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\nfirst file", encoding="utf-8")
    (tmp_path / "b.md").write_text("# B\n\nsecond file", encoding="utf-8")
    assert set((await _ingest(dsn, tmp_path)).values()) == {Outcome.ADDED}
    async with connect(dsn) as client:
        saved = await ok(
            client, "save_document", {"topic": "Wombat", "content": "wombat burrows", "folder": ""}
        )
    (tmp_path / "b.md").unlink()
    # a run over the folder removes the vanished file, and only that
    assert await _ingest(dsn, tmp_path) == {"a.md": Outcome.UNCHANGED, "b.md": Outcome.REMOVED}
    rows = dict(query(dsn, "SELECT path, source FROM pgrag.documents"))
    assert rows == {"a.md": "file", saved["path"]: "saved"}
    async with connect(dsn) as client:
        assert saved["document_id"] in await search_ids(client, "wombat", mode="keyword")
