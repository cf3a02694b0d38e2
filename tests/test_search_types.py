"""The search core's declarations: the ranking options (every field of
pgrag.ranking_options, sent by name, logged, replayed), the one mode table every
transport offers, and the ranking functions honouring every argument a caller names."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp.server import MCPServer
from psycopg.rows import dict_row

from pgrag.cli.search_commands import search as search_command
from pgrag.db.database import open_database
from pgrag.embeddings.hashing import HashEmbedder
from pgrag.ingest.pipeline import Ingestor
from pgrag.mcp.server import build_server
from pgrag.search.engine import SearchService
from pgrag.search.models import SearchRequest
from pgrag.search.modes import DISTINCT_MODES, MODES, SearchMode, ShownScore, mode_spec
from pgrag.search.options import OPTION_NAMES
from pgrag.settings import load_settings
from tests.support.ranking_defaults import replace_ranking_defaults

pytestmark = pytest.mark.anyio

PGRAG = Path(__file__).resolve().parent.parent / "pgrag"
FILLER = " ".join(f"filler{i}" for i in range(30))
FILES = {
    # proximity compares the chunks of one document: in the first section the two query
    # words stand 31 positions apart (a window of 10 cannot hold both, one of 50 can)
    "apart.md": f"# Far\n\n## One\n\nAlpha starts here. {FILLER} and beta ends it.\n\n"
    "## Two\n\nAlpha and beta stand together in this sentence.\n",
    "tea.md": "# Tea\n\nGreen tea is brewed with water below boiling.\n",
    "garden.md": "# Garden\n\nBoiling water kills the weeds between the paving stones.\n",
}


async def _ingest(dsn: str, folder: Path) -> None:
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    async with open_database(load_settings(), dsn=dsn) as db:
        summary = await Ingestor(db.pool, HashEmbedder("hash/64"), collection="kb").run([folder])
    assert not summary.failures, summary.failures


async def _search(dsn: str, req: SearchRequest) -> int:
    async with open_database(load_settings(), dsn=dsn) as db:
        page = await SearchService(db.pool, HashEmbedder("hash/64")).search(req)
    assert page.data.search_id is not None and page.data.results
    return page.data.search_id


async def test_every_ranking_option_is_logged_and_replayed_after_its_default_changes(
    dsn: str, tmp_path: Path
) -> None:
    """proximity_width included: the replay of a search run with windows of 10 keeps its
    proximity after the default becomes 50, while a search run today sees 50."""
    await _ingest(dsn, tmp_path / "kb")
    sid = await _search(dsn, SearchRequest(query="alpha beta", mode=SearchMode.KEYWORD))
    replay = "SELECT chunk_id, lexical_proximity FROM pgrag.explain_search(%s) ORDER BY rank"
    today = (
        "SELECT chunk_id, lexical_proximity FROM pgrag.hybrid_search_detail('alpha beta', NULL)"
        " ORDER BY rank"
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        params = conn.execute("SELECT params FROM pgrag.search_log WHERE id = %s", (sid,))
        logged = params.fetchone()
        defaults = conn.execute("SELECT * FROM pgrag.fusion_defaults()")
        cols = [c.name for c in defaults.description or []]
        assert logged is not None and set(cols) == set(OPTION_NAMES) <= logged[0].keys()
        assert logged[0]["proximity_width"] == 10
        before = conn.execute(replay, (sid,)).fetchall()
        assert sorted(p for _, p in before) == [0.5, 1.0]  # apart, together
        replace_ranking_defaults(conn, proximity_width=50)
        assert conn.execute(replay, (sid,)).fetchall() == before
        assert [p for _, p in conn.execute(today).fetchall()] == [1.0, 1.0]


DOCUMENTS_SQL = """
SELECT document_id, lexical_rank, semantic_rank, total_documents
FROM pgrag.hybrid_search_documents(
    'boiling water', (SELECT query_embedding FROM pgrag.search_log WHERE id = %(sid)s),
    10, opts => pgrag.ranking_options(lexical_weight => %(lw)s, semantic_weight => %(sw)s,
                                      pool_size => %(pool)s))
ORDER BY rank
"""


async def test_the_documents_scope_honours_the_callers_weights_and_pool(
    dsn: str, tmp_path: Path
) -> None:
    """The options the caller chose reach the chunk ranking (before the composite, options
    named only on the documents function reached it as the defaults: lexical_weight => 0
    still ranked by BM25, pool_size => 1 still read 100)."""
    await _ingest(dsn, tmp_path / "kb")
    sid = await _search(dsn, SearchRequest(query="boiling water", mode=SearchMode.HYBRID))
    with psycopg.connect(dsn, row_factory=dict_row) as conn:

        def docs(lw: float | None, sw: float | None, pool: int | None) -> list[dict[str, Any]]:
            args = {"sid": sid, "lw": lw, "sw": sw, "pool": pool}
            return conn.execute(DOCUMENTS_SQL, args).fetchall()

        both = docs(None, None, None)
        assert any(r["lexical_rank"] for r in both) and any(r["semantic_rank"] for r in both)
        semantic_only = docs(0, None, None)
        assert semantic_only and all(r["lexical_rank"] is None for r in semantic_only)
        lexical_only = docs(None, 0, None)
        assert lexical_only and all(r["semantic_rank"] is None for r in lexical_only)
        assert {r["document_id"] for r in lexical_only} < {r["document_id"] for r in both}
        one_each = docs(None, None, 1)
        assert one_each[0]["total_documents"] <= 2 < both[0]["total_documents"]


def test_the_mode_table_covers_every_mode_and_exact_is_keyword() -> None:
    assert set(MODES) == set(SearchMode)
    assert mode_spec("exact") is mode_spec(SearchMode.KEYWORD)
    assert mode_spec("exact").name is SearchMode.KEYWORD
    assert DISTINCT_MODES == ("hybrid", "semantic", "keyword", "regex")
    for mode in DISTINCT_MODES:
        spec = mode_spec(mode)
        assert spec.name is mode
        # a mode that ranks by a leg runs it; a pattern mode runs neither
        assert spec.pattern == (not spec.lexical and not spec.semantic)
        assert spec.score is not ShownScore.SEMANTIC or spec.semantic
        assert spec.score is not ShownScore.LEXICAL or spec.lexical


def test_every_transport_offers_the_modes_of_the_table() -> None:
    values = [m.value for m in SearchMode]
    server = build_server(load_settings(database_url="postgresql:///x", toolsets="core"))
    tools = {t.name: t for t in asyncio.run(MCPServer.list_tools(server))}
    schema = tools["search"].input_schema
    prop = schema["properties"]["mode"]
    ref = prop.get("$ref", "").rsplit("/", 1)[-1]
    assert (schema["$defs"][ref] if ref else prop)["enum"] == values
    choices = next(p for p in search_command.params if p.name == "mode").type
    assert list(getattr(choices, "choices", [])) == values


# a mode named as a string outside search/modes.py: `mode == "regex"`, `mode in ("a", ...)`,
# or the list of modes retyped as a Literal
MODE_BY_NAME = re.compile(
    r"""\bmode\s*(==|!=|\bin\b|\bnot in\b)\s*[("'\[]|Literal\[\s*["'](hybrid|semantic|keyword)"""
)


def test_no_mode_is_checked_by_its_name_outside_the_table() -> None:
    found = [
        f"{path.relative_to(PGRAG)}:{n}: {line.strip()}"
        for path in sorted(PGRAG.rglob("*.py"))
        if path.name != "modes.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if MODE_BY_NAME.search(line)
    ]
    assert found == []


def test_ranked_rows_are_read_by_name_and_sql_is_composed_not_edited() -> None:
    search = PGRAG / "search"
    source = "".join(p.read_text(encoding="utf-8") for p in sorted(search.glob("*.py")))
    assert "args_row" not in source
    assert ".replace(" not in (search / "sql.py").read_text(encoding="utf-8")
    assert "NULL::" not in (search / "sql.py").read_text(encoding="utf-8")


SQL_FUNCTIONS = PGRAG.parent / "sql" / "functions"
HYBRID_CALL = re.compile(r"pgrag\.(hybrid_\w+|lexical_candidates|semantic_candidates)\s*\(")


def _arguments(text: str, start: int) -> list[str]:
    """The top-level arguments of the call whose '(' is at text[start - 1]."""
    depth, args, current = 0, [], ""
    for ch in text[start:]:
        if ch == ")" and depth == 0:
            return [*args, current.strip()]
        depth += (ch in "([") - (ch in ")]")
        if ch == "," and depth == 0:
            args.append(current.strip())
            current = ""
        else:
            current += ch
    raise AssertionError("unbalanced call")


def test_the_ranking_functions_call_one_another_by_argument_name() -> None:
    """A positional call shifts silently when an argument is added before the ones it
    passes (the hybrid functions and the explain replay; psql examples may be positional)."""
    positional = []
    for path in (SQL_FUNCTIONS / "40_hybrid.sql", SQL_FUNCTIONS / "50_explain.sql"):
        text = re.sub(r"--[^\n]*", "", path.read_text(encoding="utf-8"))
        for call in HYBRID_CALL.finditer(text):
            line_start = text.rfind("\n", 0, call.start()) + 1
            if text[line_start : call.start()].lstrip().startswith("CREATE"):
                continue  # the function's own definition
            args = _arguments(text, call.end())
            positional += [f"{path.name}: {call.group(1)}({a})" for a in args if "=>" not in a]
    assert positional == []


# the functions a search calls with the ranking options, and the one that builds them
OPTION_TAKERS = (
    "hybrid_search",
    "hybrid_search_detail",
    "hybrid_search_documents",
    "hybrid_fusion",
    "lexical_candidates",
    "lexical_candidates_in",
    "fused_parts",
)
ARGUMENTS_SQL = """
SELECT p.proname, coalesce(p.proargnames, '{}'),
       ARRAY(SELECT format_type(t, NULL) FROM unnest(p.proargtypes) t)
FROM pg_proc p WHERE p.pronamespace = 'pgrag'::regnamespace AND p.proname = ANY (%s)
"""
FIELDS_SQL = """
SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a
WHERE a.attrelid = 'pgrag.ranking_options'::regclass AND a.attnum > 0 AND NOT a.attisdropped
"""


def test_the_ranking_options_are_one_composite_every_search_function_takes(dsn: str) -> None:
    """The Python declaration is the SQL type field by field, in order; its constructor
    names every field; each search function takes the options as one `opts` argument and
    none of them one by one (an option added to the type reaches every function)."""
    with psycopg.connect(dsn) as conn:
        fields = conn.execute(FIELDS_SQL).fetchone()
        functions = conn.execute(ARGUMENTS_SQL, ([*OPTION_TAKERS, "ranking_options"],))
        arguments = {name: (names, types) for name, names, types in functions.fetchall()}
    assert fields is not None and tuple(fields[0]) == OPTION_NAMES
    assert tuple(arguments.pop("ranking_options")[0]) == OPTION_NAMES
    assert sorted(arguments) == sorted(OPTION_TAKERS)  # one definition each
    for name, (names, types) in arguments.items():
        assert dict(zip(names, types, strict=False))["opts"] == "pgrag.ranking_options", name
        assert not set(names) & set(OPTION_NAMES), name
