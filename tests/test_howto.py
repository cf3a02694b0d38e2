"""docs/extending.md kept true: its registry table names the real registries and what they
hold today, every file its walks name exists, and two walks are done for real (a format is a
module and one line in the parser table; a tool is a handler and one registration, answering
through an MCP client in pgrag's envelope under its function's name: listed, called, counted
and audited by that name)."""

from __future__ import annotations

import dataclasses
import importlib
import re
import sys
import types
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from psycopg_pool import AsyncConnectionPool

from pgrag.embeddings.hashing import HashEmbedder
from pgrag.embeddings.registry import _provider
from pgrag.ingest import parsers
from pgrag.ingest.parsers.base import ParsedDocument, Source, Unit
from pgrag.mcp.server import build_server
from pgrag.mcp.toolsets import MODULES, core
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.search.modes import MODES, RANKERS, ModeSpec, Ranker, SearchMode
from pgrag.search.modes import ShownScore as Shown
from pgrag.search.sql import RANK_ARGS
from pgrag.settings import load_settings
from pgrag.store.rows import RankedRow
from tests.support.kb_server import CORE_TOOLS

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[1]
EXTENDING = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")


def _registry_rows() -> dict[str, tuple[str, str]]:
    """registry -> (its dotted name, what the page says it holds today), from the table."""
    table = EXTENDING.split("## The registries", 1)[1].split("\n## ", 1)[0]
    rows = [ln.strip("|").split(" | ") for ln in table.splitlines() if ln.startswith("| ")]
    assert all(len(r) == 4 for r in rows), "a registry row has four cells"
    return {r[0].strip(): (r[1].strip("` "), r[3].strip()) for r in rows[1:]}


def _resolve(dotted: str) -> Any:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _listed(cell: str) -> list[str]:
    return [w.strip() for w in cell.split(",")]


def test_the_registry_table_names_the_real_registries() -> None:
    rows = _registry_rows()
    assert {"parsers", "search modes", "toolsets", "core tools", "embedding providers"} <= set(rows)
    for name, (where, _) in rows.items():
        if where.startswith("pgrag."):
            assert _resolve(where) is not None, name
        else:
            assert list(ROOT.glob(where.replace("NN_concern", "*"))), name


def test_the_registry_table_lists_what_each_registry_holds() -> None:
    rows = _registry_rows()
    assert _listed(rows["parsers"][1]) == list(parsers._PARSERS)
    assert _listed(rows["search modes"][1]) == [m.value for m in MODES]
    assert _listed(rows["rankers"][1]) == [r.name for r in RANKERS]
    entry = EXTENDING.split("| search modes |", 1)[1].split("\n", 1)[0]
    fields = re.search(r"ModeSpec\(([^)]*)\)", entry).group(1)  # type: ignore[union-attr]
    assert _listed(fields) == [f.name for f in dataclasses.fields(ModeSpec)]
    assert _listed(rows["toolsets"][1]) == list(MODULES)
    assert _listed(rows["core tools"][1]) == [h.__name__ for h in core.handlers()]
    settings = load_settings(embedding_model="hash/8")
    for entry in _listed(rows["embedding providers"][1]):
        prefix, cls = re.fullmatch(r"(?:`(\w+/)`|any other:) (\w+)", entry).groups()  # type: ignore[union-attr]
        model = {"local/": "local/multilingual-e5-small", "hash/": "hash/8", None: "openai/x"}
        assert type(_provider(settings, model[prefix])).__name__ == cls, entry


def test_every_file_the_walks_name_exists() -> None:
    walks = EXTENDING.split("## How to make the common changes", 1)[1]
    paths = set(re.findall(r"`((?:pgrag|tests|sql|benchmarks)/[\w/.*<>-]+)`", walks))
    assert len(paths) >= 10
    for path in paths:
        pattern = re.sub(r"<\w+>", "*", path)
        assert list(ROOT.glob(pattern)), f"docs/extending.md names {path}, which is gone"


# issue #41's goal: at most 4 files a change, 3 for these
GOAL = {"change a ranking default": 3, "add a setting": 3}


def test_every_walk_keeps_the_goal_and_names_its_files() -> None:
    """The table's counts keep the goal, and each is its walk's heading and last step."""
    walks = EXTENDING.split("## How to make the common changes", 1)[1]
    table = walks.split("\n### ", 1)[0]
    rows = [
        [c.strip() for c in ln.strip("|").split(" | ")]
        for ln in table.splitlines()
        if ln.startswith("| ")
    ]
    assert len(rows) >= 7
    for change, cell in rows[1:]:
        counts = [int(n) for n in re.findall(r"\d+", re.sub(r"\(.*?\)", "", cell))]
        assert counts and max(counts) <= GOAL.get(change, 4), (change, cell)
        section = walks.split(f"\n### {change[0].upper()}{change[1:]} (", 1)[1]
        heading, section = section.split("\n", 1)
        section = section.split("\n### ", 1)[0]
        assert heading.startswith(f"{counts[0]} files"), (change, heading)
        assert all(str(n) in heading for n in counts), (change, heading)
        steps = re.findall(r"^(\d)\. ", section, re.M) + re.findall(r"\((\d)\)", section)
        assert max(int(n) for n in steps) == max(counts), (change, steps)


RANKER_SQL = """
SELECT array_agg(n ORDER BY i) FILTER (WHERE m = 'i') AS takes,
       array_agg(n ORDER BY i) FILTER (WHERE m = 't') AS gives
FROM pg_proc p, unnest(p.proargnames, p.proargmodes) WITH ORDINALITY a(n, m, i)
WHERE p.pronamespace = 'pgrag'::regnamespace AND p.proname = %s
"""


def test_every_mode_has_a_row_and_every_ranker_its_sql(dsn: str) -> None:
    """Each ranker of the table has its function, with the rankers' one signature (the
    search calls them all alike) and RankedRow's columns."""
    assert {spec.ranker for spec in MODES.values()} == set(RANKERS)
    columns = {f.name for f in dataclasses.fields(RankedRow)}
    with psycopg.connect(dsn) as conn:
        for ranker in RANKERS:
            takes, gives = conn.execute(RANKER_SQL, (ranker.function,)).fetchone()  # type: ignore[misc]
            assert takes == [*RANK_ARGS[:7], "opts", *RANK_ARGS[7:]], ranker
            assert {"rank", "chunk_id", "document_id", "total"} <= set(gives) <= columns, ranker


# the worked example's ranker: the shortest chunks holding the query's text first
RANK_SHORTEST = """
CREATE FUNCTION pgrag.rank_shortest(
    query_text text, query_embedding vector, scope text, collection_ids bigint[],
    filters jsonb, match_count int, match_offset int, opts pgrag.ranking_options,
    min_similarity float8, embedding_model text, query_lang text, with_parts boolean
) RETURNS TABLE (rank int, chunk_id bigint, document_id uuid, total int, fused_score float8)
LANGUAGE sql STABLE AS $$
    SELECT row_number() OVER (ORDER BY length(c.content), c.id)::int, c.id, c.document_id,
           count(*) OVER ()::int, 1.0 / length(c.content)
    FROM pgrag.chunks c
    WHERE strpos(c.content, query_text) > 0
    ORDER BY length(c.content), c.id
    LIMIT match_count OFFSET match_offset
$$"""
NOTES = {  # path -> text: BM25 ranks the long note first (four herons), the new ranker last
    "long.txt": "heron heron heron heron nest by the lake",
    "short.txt": "a heron",
}
NOTES_SQL = """
WITH c AS (INSERT INTO pgrag.collections (name) VALUES ('notes') RETURNING id)
INSERT INTO pgrag.documents (collection_id, path, name, file_type, status)
SELECT c.id, n.path, n.path, 'txt', 'ready' FROM c, unnest(%(paths)s::text[]) n(path);
"""
CHUNKS_SQL = """
INSERT INTO pgrag.chunks (document_id, collection_id, ordinal, content, content_hash,
                          token_count, char_start, char_end)
SELECT d.id, d.collection_id, 1, n.body, '\\x01'::bytea, 8, 0, length(n.body)
FROM pgrag.documents d JOIN unnest(%(paths)s::text[], %(bodies)s::text[]) n(path, body) ON n.path = d.path
"""


async def test_a_ranker_is_its_row_and_its_function(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(NOTES_SQL, {"paths": list(NOTES)})
        conn.execute(CHUNKS_SQL, {"paths": list(NOTES), "bodies": list(NOTES.values())})
        conn.execute(RANK_SHORTEST)  # (1) its function
    pool = AsyncConnectionPool(dsn, min_size=1, max_size=2, open=False)
    await pool.open()
    try:
        service = SearchService(pool, HashEmbedder("hash/384"))
        req = SearchRequest(query="heron", mode="keyword")
        bm25 = (await service.search(req)).data.results
        assert [h.path for h in bm25] == ["long.txt", "short.txt"]
        # (2) its row; a mode of its own would be a SearchMode member with this row (an
        # enum takes no member in a running process, so keyword's row is replaced here)
        shortest = Ranker("shortest", "rank_shortest")
        row = dataclasses.replace(MODES[SearchMode.KEYWORD], ranker=shortest)
        monkeypatch.setitem(MODES, SearchMode.KEYWORD, dataclasses.replace(row, score=Shown.FUSED))
        hits = (await service.search(req)).data.results
    finally:
        await pool.close()
    assert [h.path for h in hits] == ["short.txt", "long.txt"]
    assert [h.score for h in hits] == [round(1 / len(NOTES[h.path]), 6) for h in hits]


def _parse_note(src: Source) -> ParsedDocument:
    """A format of one line per unit: the worked example's parser."""
    lines = src.read(1 << 20).decode().splitlines()
    return ParsedDocument("note", [Unit("section", i, ln) for i, ln in enumerate(lines, 1)])


def test_a_new_format_is_a_module_and_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "plan.note").write_text("first\nsecond\n", encoding="utf-8")
    with pytest.raises(parsers.ParseError):  # not a format yet
        parsers.parse(tmp_path / "plan.note")
    module = types.ModuleType("pgrag.ingest.parsers.note")
    module.parse = _parse_note  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)  # (1) the module
    monkeypatch.setitem(parsers._PARSERS, "note", ("note", "parse"))  # (2) its line
    # what the package computes from the table at import
    extensions = frozenset({*parsers.SUPPORTED_EXTENSIONS, "note"})
    monkeypatch.setattr(parsers, "SUPPORTED_EXTENSIONS", extensions)
    doc = parsers.parse(tmp_path / "plan.note")
    assert [u.body for u in doc.units] == ["first", "second"]
    assert doc.file_type == "note"


# the worked example's tool: a module of the core package holding its handler
COUNT_FOLDERS = '''"""count_folders: how many folders the caller can see."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context
from pydantic import BaseModel

from pgrag.mcp.app_state import enveloped, scope_of, state_of
from pgrag.mcp.envelope import Envelope
from pgrag.mcp.toolsets.core.common import result
from pgrag.services import documents as docs


class FolderCount(BaseModel):
    folders: int


@enveloped()
async def count_folders(ctx: Context[Any, Any]) -> result(FolderCount):
    """How many folders the caller can see."""
    rows = await docs.folders_of(state_of(ctx).pool, scope_of(ctx))
    return Envelope[FolderCount](data=FolderCount(folders=len(rows)))
'''


async def test_a_new_tool_is_its_handler(
    dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "counts.py").write_text(COUNT_FOLDERS, encoding="utf-8")  # (1) the handler
    # where the package's modules are found: pgrag/mcp/toolsets/core/ and, here, tmp_path
    monkeypatch.setattr(core, "__path__", [*core.__path__, str(tmp_path)])
    try:
        assert "count_folders" in [h.__name__ for h in core.handlers()]
        server = build_server(load_settings(database_url=dsn, embedding_model="hash/384"))
        async with Client(server, raise_exceptions=True) as client:
            listed = [t.name for t in (await client.list_tools()).tools]
            answer = await client.call_tool("count_folders", {})
    finally:
        sys.modules.pop(f"{core.__name__}.counts", None)
    assert set(listed) == CORE_TOOLS | {"count_folders"}
    body = answer.structured_content
    assert body is not None and body["ok"] and not answer.is_error, body
    assert body["data"] == {"folders": 0}  # a fresh database: nothing ingested
    with psycopg.connect(dsn) as conn:
        audited = conn.execute("SELECT tool, outcome FROM pgrag.audit_log").fetchall()
    assert audited == [("count_folders", "SUCCESS")]
