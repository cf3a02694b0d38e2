"""Helpers and fixtures of tests/test_citus_ops*.py."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.errors import UpstreamError
from pgrag.ingest.pipeline import Ingestor, Outcome
from pgrag.ingest.reindex import reindex
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.services import documents as docs
from pgrag.services.graph import GraphService
from pgrag.services.retention import prune_logs
from pgrag.services.saved import DocumentPatch, NewDocument, SavedDocuments
from pgrag.settings import load_settings
from tests.support.citus import CitusCluster, fresh_database, migrate
from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database

SECTIONS = "\n\n".join(
    f"## Step {i}: {topic}\n\nThe {topic} step of the contract review checks the supplier "
    f"{detail} before the invoices are paid."
    for i, (topic, detail) in enumerate(
        [
            ("intake", "name and registration"),
            ("pricing", "prices against the framework agreement"),
            ("liability", "liability caps and insurance"),
            ("privacy", "data processing terms"),
            ("termination", "notice periods and exit costs"),
            ("signing", "authorised signatories"),
            ("archive", "archive copy and retention period"),
        ],
        start=1,
    )
)


CORPUS: dict[str, dict[str, str]] = {
    "legal": {
        "contracts/signing.md": "# Contract signing\n\nEvery supplier contract is signed by two "
        "authorised managers after the legal review. Signed contracts go to the archive.\n",
        "contracts/合同.txt": "合同管理制度\n\n合同由业务部门起草，经法务部门审核后签署。\n",
        "contracts/review.md": f"# Contract review procedure\n\n{SECTIONS}\n",
    },
    "hr": {
        "leave.md": "# Leave policy\n\nEmployees receive twenty days of paid vacation leave. "
        "Vacation requests are made two weeks in advance.\n",
        "expenses.md": "# Travel expenses\n\nSubmit expense claims with the original invoices "
        "within 30 days; finance reviews each claim and the contract terms.\n",
        "old/handbook.md": "# Old handbook\n\nThe supplier contract review used to take a "
        "month; invoices waited for it.\n",
    },
    "finance": {
        "invoices.md": "# Invoices\n\nInvoices are paid within 30 days of receipt when the "
        "contract and the purchase order match.\n",
        "audit.md": "# Audit\n\nThe yearly audit samples invoices, contracts and expense claims.\n",
    },
}


PROVIDER = HashEmbedder("hash/384")


def _write_folder(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


async def _ingest(dsn: str, root: Path, collection: str, provider: Any = PROVIDER) -> Any:
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        return await Ingestor(db.pool, provider, collection=collection).run([root])


@pytest.fixture(scope="module")
def pair(
    citus: CitusCluster,
    server_dsn: str,
    template_dsn: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, str, Path]]:
    """CORPUS ingested into a cluster database distributed by collection and into a single
    server: (cluster url, single-server url, the folders: c/<collection>, s/<collection>)."""
    url = fresh_database(citus)
    asyncio.run(migrate(url, True))
    single = create_database(server_dsn)
    with psycopg.connect(single, autocommit=True) as conn:
        # no ANALYZE behind the test's back: BM25's N stays the exact count on both sides
        conn.execute("ALTER TABLE pgrag.chunks SET (autovacuum_enabled = off)")
    tmp = tmp_path_factory.mktemp("ops")
    for side, dsn in (("c", url), ("s", single)):
        for collection, files in CORPUS.items():
            _write_folder(tmp / side / collection, files)
            summary = asyncio.run(_ingest(dsn, tmp / side / collection, collection))
            assert not summary.failures, summary.failures
    yield url, single, tmp
    drop_database(server_dsn, single)


def _settle_vectors(pair: tuple[str, str, Path]) -> None:
    """Vacuum and analyze the vectors on both sides: after the deletes and re-ingests before,
    an autovacuum between two searches would reshape the HNSW graph (or the plan) and let
    the approximate semantic pool differ between them."""
    for _, dsn, _ in _both(pair):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE pgrag.embeddings")


def _both(pair: tuple[str, str, Path]) -> list[tuple[str, str, Path]]:
    """(side, url, that side's folders) for the cluster and the single server."""
    url, single, tmp = pair
    return [("c", url, tmp / "c"), ("s", single, tmp / "s")]


# a saved document's path ends in its id: the same document has another id on each side
PATH = "regexp_replace(d.path, '-[0-9a-f]{6,}[.]md$', '.md')"


def _state(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """What a document version writes, per collection and path, with the per-language sums
    (n, documents, and the sum vector rounded) per collection, set model and language."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with psycopg.connect(url) as conn:
        out["documents"] = conn.execute(
            f"SELECT c.name, {PATH}, d.status, d.error_code, d.content_hash, d.vectors_pending"
            " FROM pgrag.documents d"
            " JOIN pgrag.collections c ON c.id = d.collection_id ORDER BY 1, 2"
        ).fetchall()
        for table in ("units", "chunks"):
            out[table] = conn.execute(
                f"SELECT c.name, {PATH}, count(t.*) FROM pgrag.{table} t"
                " JOIN pgrag.documents d ON d.collection_id = t.collection_id"
                "  AND d.id = t.document_id"
                " JOIN pgrag.collections c ON c.id = t.collection_id GROUP BY 1, 2 ORDER BY 1, 2"
            ).fetchall()
        out["contents"] = conn.execute(
            f"SELECT c.name, {PATH}, string_agg(ch.content, ' | ' ORDER BY ch.ordinal)"
            " FROM pgrag.chunks ch JOIN pgrag.documents d ON d.collection_id = ch.collection_id"
            "  AND d.id = ch.document_id JOIN pgrag.collections c ON c.id = ch.collection_id"
            " GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
        out["embeddings"] = conn.execute(
            "SELECT c.name, es.model, count(*) FROM pgrag.embeddings e"
            " JOIN pgrag.embedding_sets es ON es.id = e.set_id"
            " JOIN pgrag.collections c ON c.id = e.collection_id GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
        out["language_sums"] = _sums(conn)
    return out


def _sums(conn: psycopg.Connection) -> list[tuple[Any, ...]]:
    rows = conn.execute(
        "SELECT c.name, es.model, ls.lang, sum(ls.n)::int, sum(ls.documents)::int,"
        "       sum(ls.total)::real[]"
        " FROM pgrag.language_sums ls JOIN pgrag.collections c ON c.id = ls.collection_id"
        " JOIN pgrag.embedding_sets es ON es.id = ls.set_id"
        " GROUP BY 1, 2, 3 HAVING sum(ls.documents) <> 0 ORDER BY 1, 2, 3"
    ).fetchall()
    return [(*r[:5], [round(x, 4) for x in r[5]]) for r in rows]


def _recounted_sums(url: str) -> list[tuple[Any, ...]]:
    """The sums recounted from the vectors (what they must equal), in a rolled-back
    transaction."""
    with psycopg.connect(url) as conn:
        conn.execute(
            "SELECT pgrag.recount_language_sums(es.id) FROM pgrag.embedding_sets es"
            " WHERE es.state = 'active'"
        )
        got = _sums(conn)
        conn.rollback()
    return got


async def _search(
    dsn: str, searches: list[dict[str, Any]], *, walk: bool = False
) -> list[list[list[tuple[str, int, float]]]]:
    """Each search's pages (one page unless `walk`: then every page by continuation token)
    as (path, rank, score) per hit."""
    out = []
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        service = SearchService(db.pool, PROVIDER)
        for kw in searches:
            pages, token = [], None
            while True:
                page = await service.search(
                    SearchRequest(max_tokens=25000, continuation_token=token, **kw)
                )
                pages.append([(h.path, h.rank, round(h.score, 6)) for h in page.data.results])
                token = page.next_token
                if not walk or token is None:
                    break
                assert len(pages) < 50, "the walk does not end"
            out.append(pages)
    return out


class FailingEmbedder(HashEmbedder):
    """Embeds the first `ok` texts it is asked for, then the provider is 'down'."""

    def __init__(self, ok: int) -> None:
        super().__init__("hash/384", batch_size=1)
        self.ok = ok

    async def _embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        if self.ok < len(texts):
            raise UpstreamError("the embedding provider is down (test)")
        self.ok -= len(texts)
        return await super()._embed(texts, is_query=is_query)


class WrongDimensionsEmbedder(HashEmbedder):
    """Claims the collection's 384 dimensions but answers 383: the version's units and
    chunks are inserted, then its embeddings are refused by the set's HNSW index, inside
    the version's transaction."""

    def __init__(self) -> None:
        super().__init__("hash/383")
        self.model = "hash/384"

    async def probe_dimensions(self) -> int:
        return 384


PAGED: list[dict[str, Any]] = [
    {"query": "contract review invoices", "mode": "hybrid", "limit": 3},
    {"query": "contract review invoices", "mode": "keyword", "limit": 4},
    {"query": "supplier contract", "mode": "semantic", "limit": 5},
    {"query": "contract invoices", "mode": "hybrid", "limit": 2, "scope": "documents"},
    {"query": "step", "mode": "keyword", "limit": 3, "filters": {"collection": "legal"}},
    {"query": r"[0-9]+ days", "mode": "regex", "limit": 1},
]


def _two_collections(url: str, query: str) -> dict[str, Any]:
    """BM25 pool and hybrid ranking over legal + hr, as (path, score) lists, and the shard of
    each collection."""
    vector = str([float(x) for x in asyncio.run(PROVIDER.embed_query(query))])
    with psycopg.connect(url) as conn:
        ids = [
            r[0]
            for r in conn.execute(
                "SELECT id FROM pgrag.collections WHERE name IN ('legal', 'hr') ORDER BY name"
            ).fetchall()
        ]
        join = (
            " JOIN pgrag.chunks c ON c.id = x.chunk_id"
            " JOIN pgrag.documents d ON d.collection_id = c.collection_id AND d.id = c.document_id"
        )
        lexical = conn.execute(
            "SELECT d.path, c.ordinal, round(x.score::numeric, 6)::float8"
            f" FROM pgrag.lexical_candidates(%s, %s::bigint[]) x {join}"
            " ORDER BY x.rank",
            (query, ids),
        ).fetchall()
        hybrid = conn.execute(
            "SELECT d.path, c.ordinal, round(x.fused_score::numeric, 6)::float8,"
            "       round(x.lexical_score::numeric, 6)::float8"
            # the lexical leg only: the semantic pool comes from an approximate (HNSW)
            # index, which may leave a chunk out on one side under concurrent vacuum
            " FROM pgrag.hybrid_search(%s, %s::vector, 20, %s::bigint[],"
            " opts => pgrag.ranking_options(semantic_weight => 0)) x"
            f" {join} ORDER BY x.rank",
            (query, vector, ids),
        ).fetchall()
        stats = conn.execute(
            "SELECT count(*), avg(length(tsv)) FROM pgrag.chunks WHERE collection_id = ANY (%s)",
            (ids,),
        ).fetchone()
    return {"ids": ids, "lexical": lexical, "hybrid": hybrid, "stats": stats}


def _explained(url: str, searches: list[dict[str, Any]]) -> list[list[tuple[Any, ...]]]:
    """Each search run by the service, then replayed by pgrag.explain_search (ids dropped)."""
    out = []
    for kw in searches:
        ids = asyncio.run(_logged_search(url, kw))
        with psycopg.connect(url) as conn:
            rows = conn.execute(
                "SELECT rank, logged_rank, document_path, location, lexical_rank,"
                " round(lexical_score::numeric, 5), semantic_rank,"
                " round(semantic_score::numeric, 5), round(fused_score::numeric, 5), fusion,"
                " round(lexical_share::numeric, 5), query_lang, chunk_lang, centred,"
                " round(lexical_proximity::numeric, 5), snippet"
                " FROM pgrag.explain_search(%s)",
                (ids,),
            ).fetchall()
        out.append(rows)
    return out


async def _logged_search(dsn: str, kw: dict[str, Any]) -> int:
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        page = await SearchService(db.pool, PROVIDER).search(SearchRequest(**kw))
    assert page.data.search_id is not None
    return page.data.search_id


EXPLAINED: list[dict[str, Any]] = [
    {"query": "contract review invoices", "mode": "hybrid", "limit": 5},
    {"query": "vacation leave", "mode": "keyword", "filters": {"collection": "hr"}},
    {"query": "supplier contract", "mode": "semantic", "limit": 4, "continuation_token": None},
]


def _cli_explain(url: str, distributed: str) -> list[tuple[Any, ...]]:
    """`pgrag search --explain --json` as a user runs it, then its psql reproduction
    `pgrag.explain_search(<search_id>)`: hits with their leg ranks and scores, and the
    replay's (rank, path, fused score)."""
    proc = subprocess.run(
        pgrag_cmd(
            "--database-url",
            url,
            "search",
            "contract review invoices",
            "--explain",
            "--json",
            "--limit",
            "4",
        ),
        env={**os.environ, "PGRAG_EMBEDDING_MODEL": "hash/384", "PGRAG_DISTRIBUTED": distributed},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    hits = [
        (
            h["rank"],
            h["path"],
            round(h["score"], 6),
            h["explain"]["lexical_rank"],
            h["explain"]["semantic_rank"],
            round(h["explain"]["fused_score"], 6),
        )
        for h in data["results"]
    ]
    with psycopg.connect(url) as conn:
        replay = conn.execute(
            "SELECT rank, document_path, round(fused_score::numeric, 6)::float8"
            " FROM pgrag.explain_search(%s)",
            (data["search_id"],),
        ).fetchall()
    assert [(r[0], r[1], r[5]) for r in hits] == [tuple(r) for r in replay]
    return hits


def _settings(dsn: str) -> Any:
    return load_settings(database_url=dsn, embedding_model="hash/384", collection="notes")


async def _write_and_delete(dsn: str, root: Path) -> dict[str, Any]:
    """Save, update and delete saved documents (the write toolset's service), delete an
    ingested document as the REST API does, drop a folder as watch mode does; what
    find_documents and a search see after."""
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        settings = _settings(dsn)
        saved = SavedDocuments(db.pool, PROVIDER, settings, settings.write_max_chars, None)
        kept = await saved.create(
            NewDocument(
                content="# Supplier onboarding\n\nNew suppliers send their bank details and "
                "the signed contract before the first invoice.",
                topic="Supplier onboarding",
                tags=["suppliers"],
            )
        )
        gone = await saved.create(
            NewDocument(content="# Draft\n\nA draft about invoices, to be deleted.", topic="Draft")
        )
        await saved.update(
            kept.document_id,
            DocumentPatch(
                content="# Supplier onboarding\n\nNew suppliers send bank details, the signed "
                "contract and a tax certificate before the first invoice.",
                tags=["suppliers", "tax"],
            ),
        )
        deleted = await saved.delete(gone.document_id)
        assert deleted.deleted
        # REST DELETE /documents/{id}
        await docs.delete_document(db.pool, None, "audit.md")
        # watch mode: the folder old/ was deleted
        removed = await Ingestor(db.pool, PROVIDER, collection="hr").remove(root / "hr", ["old"])
        assert removed == ["old/handbook.md"]
        found = await saved.find("onboarding", ["tax"], 10, include_content=True)
        service = SearchService(db.pool, PROVIDER)
        page = await service.search(
            SearchRequest(query="supplier tax certificate invoices", mode="hybrid", limit=10)
        )
    return {
        "found": [(f.title, f.tags, f.content) for f in found],
        "search": [(h.path.rsplit("-", 1)[0], round(h.score, 6)) for h in page.data.results],
    }


async def _reindexed(dsn: str) -> list[list[list[tuple[str, int, float]]]]:
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        result = await reindex(db.pool, "hr", HashEmbedder("hash/256"), batch=2, drop_old=True)
    assert result.chunks > 0 and result.dropped_set_ids
    searches: list[dict[str, Any]] = [
        {"query": q, "mode": m, "limit": 5, "filters": {"collection": "hr"}}
        for q in ("vacation leave requests", "expense claims")
        for m in ("semantic", "hybrid")
    ]
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        service = SearchService(db.pool, HashEmbedder("hash/256"))
        pages = []
        for kw in searches:
            page = await service.search(SearchRequest(**kw))
            pages.append([[(h.path, h.rank, round(h.score, 6)) for h in page.data.results]])
    return pages


async def _graph_and_retention(dsn: str) -> dict[str, Any]:
    settings = _settings(dsn)
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        graph = GraphService(db.pool, settings)
        async with db.pool.connection() as conn:
            chunk = await (
                await conn.execute(
                    "SELECT c.id FROM pgrag.chunks c JOIN pgrag.documents d"
                    " ON d.collection_id = c.collection_id AND d.id = c.document_id"
                    " WHERE d.path = 'contracts/signing.md'"
                )
            ).fetchone()
        assert chunk is not None
        alice = await graph.create_node(
            None, "Person", "Alice Legal", {"team": "legal"}, None, None
        )
        signing = await graph.create_node(None, "Document", "Signing", None, None, chunk[0])
        hr = await graph.create_node(None, "Organization", "HR", None, "leave.md", None)
        await graph.create_relationship(alice.id, signing.id, "MENTIONS", None)
        await graph.create_relationship(alice.id, hr.id, "WORKS_FOR", {"since": 2020})
        path = await graph.find_path(signing.id, hr.id, 3, None, "both")
        near = await graph.neighbors(alice.id, 2, None, "out", 10)
        _, fuzzy = await graph.fuzzy_search("alise legal", None, 5)
        assert signing.document_id is not None and hr.document_id is not None
        await graph.delete_node(hr.id, detach=True)
        async with db.pool.connection() as conn:  # a search a year old, and one now
            await conn.execute(
                "INSERT INTO pgrag.search_log (query, mode, scope, params, results, created_at)"
                " VALUES ('old', 'keyword', 'chunks', '{}', '[]', now() - interval '400 days'),"
                "        ('new', 'keyword', 'chunks', '{}', '[]', now())"
            )
        pruned = await prune_logs(db.pool, 30, batch=1)
        async with db.pool.connection() as conn:
            left = await (
                await conn.execute(
                    "SELECT array_agg(query) FROM pgrag.search_log WHERE query IN ('old', 'new')"
                )
            ).fetchone()
    return {
        "path": path and [n.name for n in path.nodes],
        "near": sorted((n.name, d) for n, d in near.nodes),  # ties: by random node ids
        "fuzzy": [n.name for n in fuzzy][:1],
        "links": (signing.chunk_id == chunk[0], hr.document_id is not None),
        "pruned": pruned[0],
        "logs_left": left and left[0],
    }


GRAPH_FILES = {
    "kept.md": "# Kept\n\nThe kept handbook explains supplier onboarding.\n",
    "gone.md": "# Gone\n\nA page about archive boxes that leaves the folder.\n",
    "rest.md": "# Rest\n\nA page about parking permits deleted through the REST API.\n",
    "dir/watched.md": "# Watched\n\nA page about desk booking in a folder watch mode drops.\n",
}


# a saved document's path carries its id: the same on both sides once cut
_CUT_ID = r"-[0-9a-f]{6,}[.]md$"


async def _graph_links_after_deletes(dsn: str, root: Path) -> list[tuple[Any, ...]]:
    """Nodes linked to every kind of document and chunk, then every delete path and a new
    version; each node's links after (the document's path, the chunk's document's path),
    and links pointing at nothing."""
    _write_folder(root, GRAPH_FILES)
    settings = load_settings(database_url=dsn, embedding_model="hash/384", collection="graphs")
    async with open_database(load_settings(), dsn=dsn, max_size=2) as db:
        ingestor = Ingestor(db.pool, PROVIDER, collection="graphs")
        assert not (await ingestor.run([root])).failures
        saved = SavedDocuments(db.pool, PROVIDER, settings, settings.write_max_chars, None)
        note = await saved.create(NewDocument(content="# Note\n\nA note on desks.", topic="Note"))
        async with db.pool.connection() as conn:
            await conn.execute(
                "INSERT INTO pgrag.graph_nodes (label, name, document_id, chunk_id)"
                " SELECT 'Topic', 'doc ' || regexp_replace(d.path, %(cut)s, '.md'), d.id, NULL"
                " FROM pgrag.documents d JOIN pgrag.collections c ON c.id = d.collection_id"
                " WHERE c.name = 'graphs'"
                " UNION ALL"
                " SELECT 'Topic', 'chunk ' || regexp_replace(d.path, %(cut)s, '.md'), NULL, ch.id"
                " FROM pgrag.chunks ch JOIN pgrag.documents d ON d.collection_id = ch.collection_id"
                "  AND d.id = ch.document_id JOIN pgrag.collections c ON c.id = d.collection_id"
                " WHERE c.name = 'graphs' AND ch.ordinal = 1",
                {"cut": _CUT_ID},
            )
        # a new version of kept.md (its chunks replaced), gone.md gone from the folder
        (root / "kept.md").write_text(GRAPH_FILES["kept.md"] + "\nNew: tax forms too.\n")
        (root / "gone.md").unlink()
        summary = await ingestor.run([root])
        assert not summary.failures and summary.count(Outcome.REMOVED) == 1, summary
        await docs.delete_document(db.pool, None, "rest.md")  # REST DELETE /documents/{id}
        assert await ingestor.remove(root, ["dir"]) == ["dir/watched.md"]  # watch mode
        assert (await saved.delete(note.document_id)).deleted  # the write toolset
        async with db.pool.connection() as conn:
            nodes = await (
                await conn.execute(
                    "SELECT name, document_id, chunk_id FROM pgrag.graph_nodes"
                    " WHERE name ~ '^(doc|chunk) ' ORDER BY name"
                )
            ).fetchall()
            paths = dict(
                await (await conn.execute("SELECT id, path FROM pgrag.documents")).fetchall()
            )
            chunk_docs = dict(
                await (await conn.execute("SELECT id, document_id FROM pgrag.chunks")).fetchall()
            )
    out = []
    for name, doc, chunk in nodes:
        out.append(
            (
                name,
                None if doc is None else paths.get(doc, "dangling"),
                None if chunk is None else paths.get(chunk_docs.get(chunk), "dangling"),
            )
        )
    return out


class GatedEmbedder(HashEmbedder):
    """Passages wait at a gate (queries pass), so the state between the phases lasts."""

    def __init__(self) -> None:
        super().__init__("hash/384")
        self.gate = asyncio.Event()

    async def embed_passages(self, texts: list[str]) -> np.ndarray:
        await self.gate.wait()
        return await super().embed_passages(texts)


TWO_PHASE = {
    "memo.md": "# Memo\n\nThe supplier onboarding memo: every new supplier is checked first.",
    "zz_code.txt": "Purchase order PO-55821-KESTREL was approved.",
}
