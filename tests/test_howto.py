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
from mcp.server.mcpserver import Context
from pydantic import BaseModel

from pgrag.embeddings.registry import _provider
from pgrag.ingest import parsers
from pgrag.ingest.parsers.base import ParsedDocument, Source, Unit
from pgrag.mcp.app_state import enveloped, scope_of, state_of
from pgrag.mcp.envelope import Envelope
from pgrag.mcp.server import build_server
from pgrag.mcp.toolsets import MODULES
from pgrag.mcp.toolsets.core import HANDLERS
from pgrag.mcp.toolsets.core.common import READ_ONLY, result
from pgrag.search.modes import MODES, ModeSpec, Ranker
from pgrag.search.sql import __file__ as search_sql_file
from pgrag.services import documents as docs
from pgrag.settings import load_settings

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
    entry = EXTENDING.split("| search modes |", 1)[1].split("\n", 1)[0]
    fields = re.search(r"ModeSpec\(([^)]*)\)", entry).group(1)  # type: ignore[union-attr]
    assert _listed(fields) == [f.name for f in dataclasses.fields(ModeSpec)]
    assert _listed(rows["toolsets"][1]) == list(MODULES)
    assert _listed(rows["core tools"][1]) == [h.__name__ for h in HANDLERS]
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


def test_every_mode_has_a_row_and_every_ranker_its_sql() -> None:
    text = Path(search_sql_file).read_text(encoding="utf-8")
    assert {spec.ranker for spec in MODES.values()} == set(Ranker)
    for ranker in Ranker:
        sql_name = {"fusion": "hybrid_search", "regex": "regex_search"}[ranker.value]
        assert sql_name in text, f"search/sql.py calls no {sql_name} for {ranker}"


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


class FolderCount(BaseModel):
    folders: int


@enveloped()
async def count_folders(ctx: Context[Any, Any]) -> result(FolderCount):  # type: ignore[valid-type]
    """How many folders the caller can see."""
    rows = await docs.folders_of(state_of(ctx).pool, scope_of(ctx))
    return Envelope[FolderCount](data=FolderCount(folders=len(rows)))


async def test_a_new_tool_is_a_handler_and_one_registration(dsn: str) -> None:
    server = build_server(load_settings(database_url=dsn, embedding_model="hash/384"))
    server.tool(annotations=READ_ONLY)(count_folders)
    async with Client(server, raise_exceptions=True) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        answer = await client.call_tool("count_folders", {})
    assert "count_folders" in listed
    body = answer.structured_content
    assert body is not None and body["ok"] and not answer.is_error, body
    assert body["data"] == {"folders": 0}  # a fresh database: nothing ingested
    with psycopg.connect(dsn) as conn:
        audited = conn.execute("SELECT tool, outcome FROM pgrag.audit_log").fetchall()
    assert audited == [("count_folders", "SUCCESS")]
