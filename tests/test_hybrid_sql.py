"""pgrag.hybrid_search from psql on hand-inserted chunks: both ranks and the fused score."""

from __future__ import annotations

import subprocess

import psycopg
import pytest

from pgrag.db.embedded import psql_path

SETUP = """
INSERT INTO pgrag.collections (name) VALUES ('hand');
INSERT INTO pgrag.embedding_sets (collection_id, model, dimensions, state)
  SELECT id, 'hand/3', 3, 'active' FROM pgrag.collections WHERE name = 'hand';
UPDATE pgrag.collections c SET active_set_id = es.id FROM pgrag.embedding_sets es
  WHERE es.collection_id = c.id;
SELECT pgrag.ensure_embedding_index(id) FROM pgrag.embedding_sets;
INSERT INTO pgrag.documents (id, collection_id, path, name, file_type, status)
  SELECT '00000000-0000-0000-0000-000000000001', id, 'a.txt', 'a.txt', 'txt', 'ready' FROM pgrag.collections;
INSERT INTO pgrag.chunks (document_id, collection_id, ordinal, content, content_hash, token_count, char_start, char_end)
  SELECT '00000000-0000-0000-0000-000000000001', id, 1, 'PostgreSQL full text search ranks documents', 'h1', 6, 0, 44
  FROM pgrag.collections;
INSERT INTO pgrag.chunks (document_id, collection_id, ordinal, content, content_hash, token_count, char_start, char_end)
  SELECT '00000000-0000-0000-0000-000000000001', id, 2, '合同的签署流程需要审批', 'h2', 6, 44, 55
  FROM pgrag.collections;
INSERT INTO pgrag.embeddings (set_id, chunk_id, embedding)
  SELECT es.id, c.id, CASE c.ordinal WHEN 1 THEN '[1,0,0]'::vector ELSE '[0,1,0]'::vector END
  FROM pgrag.chunks c, pgrag.embedding_sets es;
"""

QUERY = """
SELECT c.ordinal, h.lexical_rank, h.semantic_rank, round(h.semantic_score::numeric, 3),
       round(h.fused_score::numeric, 5)
FROM pgrag.hybrid_search('full text search', '[0.9,0.1,0]'::vector, match_count => 5) h
JOIN pgrag.chunks c ON c.id = h.chunk_id ORDER BY h.fused_score DESC
"""


@pytest.fixture
def hand_dsn(dsn: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SETUP.replace("'h1'", "'\\x01'::bytea").replace("'h2'", "'\\x02'::bytea"))
    return dsn


def test_hybrid_search_from_psql_returns_both_ranks_and_the_fused_score(hand_dsn: str) -> None:
    out = subprocess.run(
        [str(psql_path()), hand_dsn, "-X", "-A", "-t", "-F", ",", "-c", QUERY],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split()
    rows = [line.split(",") for line in out]
    # chunk 1: lexical rank 1 and semantic rank 1; chunk 2: semantic only (rank 2)
    assert rows[0][:3] == ["1", "1", "1"]
    assert rows[1][:3] == ["2", "", "2"]
    # adaptive fusion: lexical share min(0.8, 1.2 * coverage 1.0) = 0.8 on BM25 / max,
    # 0.2 on min-max cosine: chunk 1 is the best of both legs, chunk 2 the worst semantic hit
    assert float(rows[0][4]) == pytest.approx(0.8 * 1 + 0.2 * 1, abs=1e-5)
    assert float(rows[1][4]) == pytest.approx(0.0, abs=1e-5)
    assert float(rows[0][3]) > float(rows[1][3])


def test_chinese_query_matches_text_with_a_particle_in_between(hand_dsn: str) -> None:
    with psycopg.connect(hand_dsn) as conn:
        rows = conn.execute(
            "SELECT c.ordinal, h.lexical_rank FROM pgrag.hybrid_search('合同签署流程', NULL, 5) h"
            " JOIN pgrag.chunks c ON c.id = h.chunk_id"
        ).fetchall()
    assert rows == [(2, 1)]


def test_weights_and_k_change_the_fusion(hand_dsn: str) -> None:
    with psycopg.connect(hand_dsn) as conn:
        rows = conn.execute(
            "SELECT c.ordinal, h.fused_score FROM pgrag.hybrid_search('full text search',"
            " '[0,1,0]'::vector, 5, opts => pgrag.ranking_options("
            "rrf_k => 10, lexical_weight => 0, semantic_weight => 2)) h"
            " JOIN pgrag.chunks c ON c.id = h.chunk_id ORDER BY h.fused_score DESC"
        ).fetchall()
    # no lexical leg: share 0, fused = semantic_weight * min-max cosine (rrf_k is for 'rrf')
    assert rows[0][0] == 2 and rows[0][1] == pytest.approx(2.0)


def test_a_hyphenated_word_in_a_plain_query_is_or_ed_like_any_term(hand_dsn: str) -> None:
    """'full-text' is not a phrase that makes the whole query need the compound:
    'full-text ranks' must find chunk 1, which has 'full text' and 'ranks' but is not
    the compound; a quoted phrase still needs its words adjacent."""
    with psycopg.connect(hand_dsn) as conn:
        tsq = conn.execute("SELECT pgrag.lexical_query('IL-1 state-of-the-art full-text')")
        assert "<" not in tsq.fetchone()[0]
        rows = conn.execute(
            "SELECT c.ordinal, h.lexical_rank"
            " FROM pgrag.hybrid_search('documents full-rank', NULL, 5) h"
            " JOIN pgrag.chunks c ON c.id = h.chunk_id"
        ).fetchall()
        assert rows == [(1, 1)]
        quoted = conn.execute(
            "SELECT count(*) FROM pgrag.hybrid_search('\"search documents\"', NULL, 5)"
        ).fetchone()[0]
        assert quoted == 0  # 'search ranks documents': the phrase is not there
        tsq = conn.execute("SELECT pgrag.lexical_query('\"full text\" IL-1')").fetchone()[0]
        assert "<->" in tsq


# ------------------------------------------------------------------ proximity, languages

FILLER = (
    "HT-2991 Temperature Transmitter Rotterdam B-09-06 291 53\n"
    "HT-4791 Humidity Transmitter Rotterdam D-06-02 614 32\n"
)
# the same words twice (equal BM25), apart in the first block, in one row in the second
ROW_BLOCKS = [
    "XR-7741 Pressure Transmitter Shanghai C-02-07 60 0\n"
    + FILLER
    + "PM-1284 Vortex Flow Meter Suzhou A-08-01 355 5",
    "XR-7741 Pressure Transmitter Suzhou C-02-07 60 0\n"
    + FILLER
    + "PM-1284 Vortex Flow Meter Shanghai A-08-01 355 5",
]


def _hand_collection(dsn: str, name: str, chunks: list[tuple[str, str, str]]) -> None:
    """Chunks (content, language, 3-d vector) of one document in a new collection."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cid = conn.execute(
            "INSERT INTO pgrag.collections (name) VALUES (%s) RETURNING id", (name,)
        ).fetchone()[0]
        sid = conn.execute(
            "INSERT INTO pgrag.embedding_sets (collection_id, model, dimensions, state)"
            " VALUES (%s, 'hand/3', 3, 'active') RETURNING id",
            (cid,),
        ).fetchone()[0]
        conn.execute("UPDATE pgrag.collections SET active_set_id = %s WHERE id = %s", (sid, cid))
        conn.execute("SELECT pgrag.ensure_embedding_index(%s)", (sid,))
        doc = conn.execute(
            "INSERT INTO pgrag.documents (collection_id, path, name, file_type, status)"
            " VALUES (%s, %s, %s, 'txt', 'ready') RETURNING id",
            (cid, f"{name}.txt", f"{name}.txt"),
        ).fetchone()[0]
        for i, (content, lang, vector) in enumerate(chunks, 1):
            chunk = conn.execute(
                "INSERT INTO pgrag.chunks (document_id, collection_id, ordinal, content,"
                " content_hash, token_count, char_start, char_end, lang)"
                " VALUES (%s, %s, %s, %s, %s, 10, 0, %s, %s) RETURNING id",
                (doc, cid, i, content, bytes([i]), len(content), lang),
            ).fetchone()[0]
            conn.execute(
                "INSERT INTO pgrag.embeddings (set_id, chunk_id, embedding)"
                " VALUES (%s, %s, %s::vector)",
                (sid, chunk, vector),
            )


def _ranked(dsn: str, sql: str, *args: object) -> list[tuple[int, float | None]]:
    with psycopg.connect(dsn) as conn:
        return [(int(r[0]), r[1]) for r in conn.execute(sql, args).fetchall()]


PROXIMITY_SQL = """
SELECT c.ordinal, h.lexical_proximity FROM pgrag.hybrid_search_detail(
    'XR-7741 Suzhou', NULL, 5, ARRAY[(SELECT id FROM pgrag.collections WHERE name = 'rows')],
    opts => pgrag.ranking_options(proximity_weight => %s)) h
JOIN pgrag.chunks c ON c.id = h.chunk_id ORDER BY h.rank
"""


def test_the_row_holding_all_the_query_words_ranks_above_a_block_holding_them_apart(
    dsn: str,
) -> None:
    """Both blocks hold XR-7741 and Suzhou (same BM25); only the second holds them in one row.
    Without proximity the tie goes to the first block (lower id): the test fails if the
    proximity term stops working."""
    _hand_collection(dsn, "rows", [(b, "en", "[1,0,0]") for b in ROW_BLOCKS])
    ranked = _ranked(dsn, PROXIMITY_SQL, None)
    assert [o for o, _ in ranked] == [2, 1]
    assert ranked[0][1] == pytest.approx(1.0)
    assert ranked[1][1] is not None and ranked[1][1] < 0.99
    assert [o for o, _ in _ranked(dsn, PROXIMITY_SQL, 0.0)] == [1, 2]


LANG_SQL = """
SELECT c.ordinal, h.lexical_share FROM pgrag.hybrid_search_detail(
    %s, '[1,0,0]'::vector, 5, ARRAY[(SELECT id FROM pgrag.collections WHERE name = 'langs')],
    query_lang => %s) h
JOIN pgrag.chunks c ON c.id = h.chunk_id ORDER BY h.rank
"""


@pytest.fixture
def langs_dsn(dsn: str) -> str:
    _hand_collection(
        dsn,
        "langs",
        [
            # 1: the answer, in Chinese, nearest the query by meaning
            ("合同签署需要两位董事审批，截止日期为月底。", "zh", "[1,0,0]"),
            # 2: English, holding most of the query's words but about something else
            ("Travel approval: the contract portal shows signing status.", "en", "[0.5,0.866,0]"),
            # 3: far away both ways
            ("Canteen opening hours.", "en", "[0,1,0]"),
        ],
    )
    return dsn


def test_an_answer_in_another_language_is_not_held_back_by_a_partial_word_match(
    langs_dsn: str,
) -> None:
    """Three of the query's four words occur in English chunk 2 (coverage ~0.6, share ~0.7);
    the Chinese chunk the words cannot match keeps its meaning-based rank (share x coverage^6
    ~ 0.03; with coverage^2 it was ~0.24 and chunk 2 came first)."""
    ranked = _ranked(langs_dsn, LANG_SQL, "contract approval signing deadline", "en")
    assert ranked[0][0] == 1
    assert ranked[0][1] is not None and ranked[0][1] < 0.05


def test_an_exact_match_in_the_query_language_still_comes_first(langs_dsn: str) -> None:
    """Every word of the query in chunk 3 (coverage 1): the full lexical share holds the
    other-language chunk back although it is nearest by meaning."""
    ranked = _ranked(langs_dsn, LANG_SQL, "canteen opening hours", "en")
    assert ranked[0][0] == 3
    chinese = dict(ranked)[1]
    assert chinese == pytest.approx(0.8)
