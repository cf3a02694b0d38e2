"""Chunking inside one unit: exact offsets, token budget, overlap, CJK sentence ends, sheets.

No database: these are properties of `chunk_text` / `chunk_sheet` alone, checked on fixed
examples and on generated text (hypothesis), with the real tokenizer.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgrag.ingest.chunking import ChunkDraft, chunk_sheet, chunk_text
from pgrag.ingest.parsers._common import sheet_unit
from pgrag.tokens import count_tokens

CJK_ENDS = "。！？"
RECOUNT_SLACK = 3

_WORDS = st.sampled_from(
    [
        "contract",
        "liability",
        "Zürich",
        "pgvector",
        "$1,234,567",
        "legal@acme-corp.com",
        "合同",
        "签署流程",
        "审批和盖章",
        "x" * 40,
    ]
)
_GAPS = st.sampled_from(
    [" ", " ", " ", ". ", "! ", "? ", "\n", "\n\n", "\n \n\n  ", "。", "！", "？"]
)


@st.composite
def texts(draw: st.DrawFn) -> str:
    """Prose-like text: words joined by spaces, sentence ends, line and paragraph breaks."""
    parts = draw(st.lists(st.tuples(_WORDS, _GAPS), min_size=0, max_size=400))
    lead = draw(st.sampled_from(["", " ", "\n\n"]))
    return lead + "".join(word + gap for word, gap in parts)


def english(paragraphs: int, sentences: int = 6) -> str:
    """Numbered sentences so that every chunk's text is unique and traceable."""
    return "\n\n".join(
        " ".join(
            f"Sentence {p}.{s} says the vendor agreement renews every year."
            for s in range(sentences)
        )
        for p in range(paragraphs)
    )


def assert_exact_slices(body: str, chunks: list[ChunkDraft]) -> None:
    for c in chunks:
        assert body[c.char_start : c.char_end] == c.content


def assert_each_chunk_adds_text(chunks: list[ChunkDraft]) -> None:
    """Starts and ends both move forward: no chunk lies inside its neighbour (a duplicate
    that would cost an embedding and show up twice in results)."""
    for prev, nxt in itertools.pairwise(chunks):
        assert prev.char_start < nxt.char_start and prev.char_end < nxt.char_end, (prev, nxt)


def assert_covers_all_text(body: str, chunks: list[ChunkDraft]) -> None:
    """Every non-blank character of the unit lands in some chunk: nothing is dropped."""
    covered = [False] * len(body)
    for c in chunks:
        covered[c.char_start : c.char_end] = [True] * (c.char_end - c.char_start)
    lost = [i for i, ch in enumerate(body) if not ch.isspace() and not covered[i]]
    assert not lost, f"text not in any chunk at {lost[:5]}: {body[lost[0] : lost[0] + 40]!r}"


@settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(body=texts(), target=st.sampled_from([16, 40, 120]), overlap=st.sampled_from([0, 8, 30]))
def test_chunks_are_exact_non_blank_slices_within_the_budget(
    body: str, target: int, overlap: int
) -> None:
    chunks = chunk_text(body, target, overlap)
    assert_exact_slices(body, chunks)
    assert_covers_all_text(body, chunks)
    for c in chunks:
        assert c.content.strip() and c.content == c.content.strip()
        assert c.token_count <= target
        # counted per sentence before the leading space is trimmed: a word can re-tokenise
        assert count_tokens(c.content) <= target + RECOUNT_SLACK
    assert_each_chunk_adds_text(chunks)


def test_chunks_respect_the_target_and_break_at_sentences() -> None:
    body = english(20)
    chunks = chunk_text(body, 60, 0)
    assert len(chunks) > 10
    assert_exact_slices(body, chunks)
    for c in chunks:
        assert c.token_count <= 60 and count_tokens(c.content) <= 60
        assert c.content.startswith("Sentence ") and c.content.endswith("every year.")


def test_overlap_repeats_the_tail_of_the_previous_chunk() -> None:
    body = english(10)
    chunks = chunk_text(body, 80, 30)
    assert len(chunks) > 5
    for prev, nxt in itertools.pairwise(chunks):
        assert prev.char_start < nxt.char_start < prev.char_end
        repeated = body[nxt.char_start : prev.char_end]
        assert prev.content.endswith(repeated) and nxt.content.startswith(repeated)
        assert 0 < count_tokens(repeated) <= 30


def test_overlap_never_makes_a_chunk_that_repeats_only_old_text() -> None:
    long_line = " ".join(f"word{i}" for i in range(24)) + "\n"  # ~50 tokens, no sentence end
    body = "One short line. Two short line. Three short line. Four short line.\n" + long_line
    body = "\n\n" + body + "Tail sentence here."
    chunks = chunk_text(body, 60, 20)
    assert_exact_slices(body, chunks)
    assert_covers_all_text(body, chunks)
    assert_each_chunk_adds_text(chunks)


def test_without_overlap_chunks_do_not_repeat_text() -> None:
    body = english(10)
    chunks = chunk_text(body, 80, 0)
    for prev, nxt in itertools.pairwise(chunks):
        assert nxt.char_start >= prev.char_end


def test_chinese_text_is_cut_after_sentence_punctuation() -> None:
    sentences = [
        "合同的签署流程需要法务审批和盖章。",
        "归档要求由合同管理员负责执行！",
        "合同变更是否需要重新审批？",
        "保存期限为合同终止后十年。",
    ]
    body = "".join(sentences * 40)  # no whitespace at all
    chunks = chunk_text(body, 60, 15)
    assert len(chunks) > 5
    assert_exact_slices(body, chunks)
    assert_covers_all_text(body, chunks)
    starts = {s[:4] for s in sentences}
    for c in chunks:
        assert c.content[-1] in CJK_ENDS, c.content[-10:]
        assert c.content[:4] in starts, c.content[:10]
        assert count_tokens(c.content) <= 60


def test_a_long_run_without_punctuation_is_still_split() -> None:
    body = "lorem ipsum dolor sit amet " * 400 + "\n\n" + "z" * 6000
    chunks = chunk_text(body, 100, 20)
    assert_exact_slices(body, chunks)
    assert_covers_all_text(body, chunks)
    assert len(chunks) > 10
    # cut near the target; a run with no whitespace has no better place to cut
    assert all(count_tokens(c.content) <= 110 for c in chunks)


def test_a_run_of_mixed_density_is_split_within_the_budget() -> None:
    # a cut length guessed from the average would put far too many CJK tokens in one piece
    body = "contract " * 500 + "审批和盖章流程归档保存期限" * 40
    chunks = chunk_text(body, 100, 0)
    assert_exact_slices(body, chunks)
    assert_covers_all_text(body, chunks)
    assert all(c.token_count <= 100 for c in chunks)
    assert all(count_tokens(c.content) <= 100 + RECOUNT_SLACK for c in chunks)


def test_blank_text_gives_no_chunks() -> None:
    for body in ("", " ", "\n\n\n", " \n \t \n\n   "):
        assert chunk_text(body, 50, 10) == []
    body = "\n\n\n   first paragraph.\n\n\n\n  \n\n second paragraph.   \n\n"
    chunks = chunk_text(body, 8, 0)
    assert [c.content for c in chunks] == ["first paragraph.", "second paragraph."]
    assert_exact_slices(body, chunks)


def _sheet(rows: int, columns: int = 5) -> list[list[str]]:
    header = [f"Column {c}" for c in range(1, columns + 1)]
    return [header] + [
        [f"r{r}c{c} value" for c in range(1, columns + 1)] for r in range(2, rows + 1)
    ]


def assert_sheet_chunks(raw: list[list[str]], target: int) -> list[ChunkDraft]:
    unit = sheet_unit(1, "Data", [list(r) for r in raw])
    lines = unit.body.split("\n")
    chunks = chunk_sheet(unit, target)
    seen: list[int] = []
    for c in chunks:
        assert c.row_start is not None and c.row_end is not None
        assert 2 <= c.row_start <= c.row_end <= len(raw)
        # the header line on top, then exactly the rows the chunk claims, sliced from the body
        assert c.content == "\n".join([lines[0], *lines[c.row_start - 1 : c.row_end]])
        assert unit.body[c.char_start : c.char_end] == "\n".join(lines[c.row_start - 1 : c.row_end])
        if c.row_end > c.row_start:  # a single over-long row is the one allowed overflow
            assert c.token_count <= target
        seen += range(c.row_start, c.row_end + 1)
    assert seen == list(range(2, len(raw) + 1)), "every data row exactly once, in order"
    return chunks


def test_sheet_chunks_repeat_the_header_and_cover_every_row_once() -> None:
    chunks = assert_sheet_chunks(_sheet(500), 120)
    assert len(chunks) > 20


def test_sheet_with_an_oversized_row_keeps_it_whole() -> None:
    raw = _sheet(30)
    raw[10] = ["long " * 300, "b", "c", "d", "e"]
    chunks = assert_sheet_chunks(raw, 80)
    alone = [c for c in chunks if c.row_start == c.row_end == 11]
    assert len(alone) == 1 and alone[0].token_count > 80


@settings(max_examples=40, deadline=None, database=None)
@given(rows=st.integers(1, 120), columns=st.integers(1, 6), target=st.sampled_from([30, 90, 400]))
def test_sheet_rows_are_covered_for_any_size(rows: int, columns: int, target: int) -> None:
    raw = _sheet(rows, columns)
    chunks = assert_sheet_chunks(raw, target) if rows > 1 else None
    if rows == 1:  # a header only: one chunk with the header as its content
        unit = sheet_unit(1, "Data", raw)
        (only,) = chunk_sheet(unit, target)
        assert only.content == unit.body and (only.row_start, only.row_end) == (1, 1)
    else:
        assert chunks


def test_empty_sheet_gives_no_chunks() -> None:
    unit = sheet_unit(1, "Charts", [])
    assert chunk_sheet(unit, 100) == []
