"""Smart snippets, rule by rule of seed 003 (三 parameters, 四 algorithm and merge rules,
九 weighted score / dynamic window / dedup, 十 ordering, cap and summary). Pure Python."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from pgrag.search.keywords import (
    CJK,
    MAX_KEYWORDS,
    Match,
    extract_keywords,
    find_matches,
    stem,
)
from pgrag.search.models import SearchRequest, Snippet
from pgrag.search.snippets import (
    DEDUP_JACCARD,
    MERGE_GAP,
    SUMMARY_CHARS,
    SnippetSource,
    Window,
    dedupe,
    finalise,
    jaccard,
    make_snippets,
    merge_windows,
    near_keywords,
    order,
    score_window,
    summary,
    window_chars,
)
from pgrag.settings import Settings

PAD = "x" * 1000  # no spaces, no punctuation: window edges cannot move


def snippets_of(
    text: str,
    query: str,
    *,
    context_chars: int = 400,
    merge: bool = True,
    details: bool = True,
    base: int = 0,
    text_len: int | None = None,
) -> list[Snippet]:
    src = SnippetSource(
        text=text,
        base=base,
        text_len=text_len or len(text) + base,
        lo=0,
        hi=len(text),
        file_id="f1",
        file_name="doc.txt",
    )
    return make_snippets(
        src,
        find_matches(text, extract_keywords(query)),
        context_chars=context_chars,
        merge_overlapping=merge,
        with_details=details,
    )


def snip(content: str, score: float, keywords: list[str], start: int = 0) -> Snippet:
    return Snippet(
        content=content,
        file_id="f",
        file_name="f.txt",
        keywords_matched=keywords,
        original_char_start=start,
        original_char_end=start + len(content),
        relevance_score=score,
    )


# --- 三: interface parameters ---------------------------------------------------------------


def test_request_defaults_are_the_seed_parameters() -> None:
    req = SearchRequest(query="contract")
    assert req.context_chars == 400  # ±400 per side
    assert req.merge_overlapping is True
    assert req.return_scoring_details is False  # first phase: no scoring details by default
    assert req.content_mode is None  # the service default (smart_extract) applies


# --- 四 B: extract the query keywords ---------------------------------------------------------


def test_keywords_drop_english_stop_words_and_operators() -> None:
    assert extract_keywords("What is the contract signing process for the new vendors?") == [
        "contract",
        "signing",
        "process",
        "new",
        "vendors",
    ]
    assert extract_keywords('"budget" OR forecast and not the') == ["budget", "forecast"]


def test_keywords_split_cjk_runs_into_bigrams() -> None:
    assert extract_keywords("合同签署流程") == ["合同", "同签", "签署", "署流", "流程"]
    assert extract_keywords("合同") == ["合同"]
    assert extract_keywords("报销 policy 报销") == ["报销", "policy"]  # distinct, query order


# --- 四 C: locate every match -------------------------------------------------------------------


def test_match_positions_point_at_the_words_and_stems() -> None:
    text = "Contracts are signed. The Signing of a contract."
    found = find_matches(text, extract_keywords("signing contract"))
    assert [(m.start, m.end, m.keyword) for m in found] == [
        (0, 9, "contract"),
        (14, 20, "signing"),
        (26, 33, "signing"),
        (39, 47, "contract"),
    ]
    assert [text[m.start : m.end] for m in found] == ["Contracts", "signed", "Signing", "contract"]


def test_cjk_query_bigrams_match_text_with_a_particle_between() -> None:
    text = "本制度规定合同的签署流程。"
    found = find_matches(text, extract_keywords("合同签署流程"))
    assert {text[m.start : m.end] for m in found} == {"合同", "签署", "署流", "流程"}
    assert all(text[m.start : m.end] == m.keyword for m in found)
    assert not any(m.keyword == "同签" for m in found)  # 同签 spans the particle 的


def test_word_matches_need_a_word_start() -> None:
    assert find_matches("subcontract", ["contract"]) == []
    assert [(m.start, m.end) for m in find_matches("a contracts, contract", ["contract"])] == [
        (2, 11),
        (13, 21),
    ]


CJK_RUN = re.compile(f"[{CJK}]+")


def _one_pattern_per_keyword(text: str, keywords: list[str]) -> list[tuple[int, int, str]]:
    """The matching rule spelled out, one regex per keyword: what the single pattern of
    KeywordMatcher must find."""
    found = []
    for kw in keywords:
        if CJK_RUN.fullmatch(kw):
            pattern = re.compile(re.escape(kw))
        else:
            pattern = re.compile(rf"(?<![^\W_]){re.escape(stem(kw))}[^\W{CJK}_]*", re.IGNORECASE)
        found += [(m.start(), m.end(), kw) for m in pattern.finditer(text)]
    return sorted(found, key=lambda f: (f[0], -f[1]))


_TEXT_CHARS = list("abcsign edtontrac SIGN-'.’_合同签署的流程哈 \nİıſKkßẞ0123")
_QUERY_WORDS = [
    "sign",
    "signing",
    "signature",
    "contracts",
    "Contract",
    "合同签署",
    "哈哈",
    "e-mail",
]
_QUERY_WORDS += ["don't", "u.s.", "12", "ſign", "İstanbul", "straße", "ing"]


@given(
    st.text(st.sampled_from(_TEXT_CHARS), max_size=80)
    | st.lists(st.sampled_from(_QUERY_WORDS), max_size=12).map(" ".join),
    st.lists(
        st.sampled_from(_QUERY_WORDS) | st.text(st.sampled_from(_TEXT_CHARS), max_size=10),
        max_size=6,
    ).map(" ".join),
)
def test_one_pattern_finds_what_a_pattern_per_keyword_finds(text: str, query: str) -> None:
    keywords = extract_keywords(query)
    found = [(m.start, m.end, m.keyword) for m in find_matches(text, keywords)]
    assert found == _one_pattern_per_keyword(text, keywords)


def test_keywords_are_capped() -> None:
    words = [f"word{i:03d}x" for i in range(MAX_KEYWORDS + 50)]
    assert extract_keywords(" ".join(words)) == words[:MAX_KEYWORDS]


# --- 四 D / 九.2: ±context_chars windows, dynamic by unique keywords ---------------------------


@pytest.mark.parametrize(
    ("query", "words", "side"),
    [
        ("contract", "contract", 500),  # 1 unique keyword: ±500
        ("contract signing", "contract signing", 400),  # 2: ±400
        ("contract signing approval", "contract signing approval", 300),  # ≥3: ±300
    ],
)
def test_dynamic_window_is_300_400_500_by_unique_keywords(
    query: str, words: str, side: int
) -> None:
    text = f"{PAD} {words} {PAD}"
    first = len(PAD) + 1
    last_end = first + len(words)
    [s] = snippets_of(text, query)
    assert s.original_char_start == first - side
    assert s.original_char_end == last_end + side
    assert len(s.content) == 2 * side + len(words)


def test_window_chars_scales_with_context_chars() -> None:
    assert [window_chars(n, 400) for n in (1, 2, 3, 7)] == [500, 400, 300, 300]
    assert [window_chars(n, 100) for n in (1, 2, 3)] == [125, 100, 75]
    text = f"{PAD} contract {PAD}"
    [s] = snippets_of(text, "contract", context_chars=100)
    assert s.content == "x" * 124 + " contract " + "x" * 124  # 125 from the match, each side


def test_context_chars_zero_still_returns_the_keyword() -> None:
    text = f"{PAD} contract {PAD}"
    [s] = snippets_of(text, "contract", context_chars=0)
    assert s.content == "contract"


# --- 四 E / 三: boundaries extend to the nearest sentence end ---------------------------------


def test_window_extends_to_latin_sentence_boundaries() -> None:
    text = (
        "The first sentence is about nothing. The second sentence has the contract clause in it. "
        "A third one follows here."
    )
    [s] = snippets_of(text, "contract", context_chars=8)
    assert s.content == "The second sentence has the contract clause in it."
    assert text[s.original_char_start : s.original_char_end] == s.content


@pytest.mark.parametrize("end", ["。", "！", "？"])
def test_window_extends_to_chinese_sentence_ends(end: str) -> None:
    text = f"第一句话说明背景。合同的签署流程需要法务审批{end}第三句话另有内容。"
    [s] = snippets_of(text, "签署", context_chars=2)
    assert s.content == f"合同的签署流程需要法务审批{end}"


def test_window_without_punctuation_stops_at_a_space() -> None:
    words = " ".join(f"w{i:03d}" for i in range(200))
    text = f"{words} contract {words}"
    [s] = snippets_of(text, "contract", context_chars=40)
    assert not s.content.startswith(("0", "1", "2")) and s.content.startswith("w")
    assert s.content.split()[-1].startswith("w") and len(s.content.split()[-1]) == 4


# --- 四 F: merging (rule 1: start ≤ last.end + 50; rule 2: end = max, keywords deduped) -----


def _w(start: int, end: int, kw: str) -> Window:
    return Window(start, end, [Match(start + 1, start + 2, kw)])


def test_windows_merge_when_the_gap_is_at_most_50() -> None:
    assert MERGE_GAP == 50
    merged = merge_windows([_w(0, 100, "a"), _w(100 + 50, 200, "b")], True)
    assert [(w.start, w.end) for w in merged] == [(0, 200)]
    assert merged[0].keywords == ["a", "b"]


def test_windows_51_apart_stay_separate() -> None:
    merged = merge_windows([_w(0, 100, "a"), _w(100 + 51, 200, "b")], True)
    assert [(w.start, w.end) for w in merged] == [(0, 100), (151, 200)]


def test_merge_keeps_the_larger_end_and_dedupes_keywords() -> None:
    merged = merge_windows([_w(0, 300, "contract"), _w(100, 200, "contract")], True)
    assert [(w.start, w.end) for w in merged] == [(0, 300)]
    assert merged[0].keywords == ["contract"]
    assert len(merged[0].matches) == 2


def test_merge_sorts_windows_by_start_first() -> None:
    merged = merge_windows([_w(500, 600, "b"), _w(0, 100, "a"), _w(120, 480, "c")], True)
    assert [(w.start, w.end) for w in merged] == [(0, 600)]


def test_merge_overlapping_false_keeps_overlapping_snippets_apart() -> None:
    text = f"{PAD} contract and then signing {PAD}"
    merged = snippets_of(text, "contract signing", merge=True)
    separate = snippets_of(text, "contract signing", merge=False)
    assert len(merged) == 1 and merged[0].keywords_matched == ["contract", "signing"]
    assert len(separate) == 2
    assert [s.keywords_matched for s in separate] == [["contract"], ["signing"]]
    assert separate[0].original_char_end > separate[1].original_char_start  # they overlap


def test_far_apart_matches_become_separate_snippets() -> None:
    text = f"contract {PAD} {PAD} contract"
    out = snippets_of(text, "contract")
    assert len(out) == 2
    assert out[0].original_char_start == 0 and out[1].original_char_end == len(text)


# --- 九.1: weighted relevance score -------------------------------------------------------------


def test_score_formula_and_scoring_details() -> None:
    w = Window(250, 400, [Match(260, 268, "a"), Match(290, 295, "b"), Match(320, 328, "a")])
    score, d = score_window(w, 1000)
    assert (d.unique_keywords, d.total_keywords, d.span, d.percent_in_doc) == (2, 3, 60, 0.25)
    expected = 10 * 2 + 1 * 3 + 150 / (60 + 1) + 50 * (1 - 0.25)
    assert score == pytest.approx(expected, abs=1e-3)


def test_scoring_details_in_snippets_match_the_formula() -> None:
    head = "y" * 600
    text = f"{head} contract then signing and contract again {PAD}"
    total_len = 4000
    [s] = snippets_of(text, "contract signing", text_len=total_len, base=0)
    d = s.scoring_details
    assert d is not None
    first = len(head) + 1
    last = text.index("contract again")
    assert (d.unique_keywords, d.total_keywords, d.span) == (2, 3, last - first)
    assert d.percent_in_doc == pytest.approx(s.original_char_start / total_len, abs=1e-4)
    expected = 10 * 2 + 1 * 3 + 150 / (d.span + 1) + 50 * (1 - s.original_char_start / total_len)
    assert s.relevance_score == pytest.approx(expected, abs=1e-3)


def test_scoring_details_only_when_asked() -> None:
    text = f"{PAD} contract {PAD}"
    [s] = snippets_of(text, "contract", details=False)
    assert s.scoring_details is None
    assert s.relevance_score == pytest.approx(
        10 + 1 + 150 + 50 * (1 - s.original_char_start / len(text)), abs=1e-3
    )


def test_denser_and_earlier_snippets_score_higher() -> None:
    dense, _ = score_window(Window(0, 10, [Match(0, 1, "a"), Match(5, 6, "b")]), 1000)
    sparse, _ = score_window(Window(0, 10, [Match(0, 1, "a"), Match(500, 501, "b")]), 1000)
    late, _ = score_window(Window(900, 910, [Match(900, 901, "a"), Match(905, 906, "b")]), 1000)
    assert dense > sparse and dense > late
    assert dense - late == pytest.approx(50 * 0.9, abs=1e-3)


# --- 九.3: dedup (normalise whitespace/case, Jaccard ≥ 0.9 keeps the higher score) -----------


def test_jaccard_normalises_whitespace_and_case() -> None:
    assert DEDUP_JACCARD == 0.9
    assert jaccard("Hello   World", "helloworld") == 1.0
    assert jaccard("abc", "xyz") == 0.0


def test_dedup_threshold_is_inclusive_at_0_9() -> None:
    a = "abcdefghijklmnopqrst"  # 19 distinct bigrams
    b = a[:-1] + "X"  # 18 shared, union 20: exactly 0.9
    c = a[:-2] + "XY"  # 17 shared, union 21: 0.81
    assert jaccard(a, b) == pytest.approx(0.9)
    assert jaccard(a, c) < 0.9
    kept = dedupe([snip(a, 10, ["a"]), snip(b, 20, ["a"])])
    assert [s.content for s in kept] == [b]  # the higher score wins
    assert {s.content for s in dedupe([snip(a, 10, ["a"]), snip(c, 20, ["a"])])} == {a, c}


def test_dedup_keeps_the_higher_scored_duplicate_whatever_the_input_order() -> None:
    text = "The contract is signed by both parties before delivery."
    low = snip(text, 5.0, ["contract"], start=0)
    high = snip(" THE CONTRACT  is signed by both parties before delivery.", 9.0, ["contract"], 500)
    for items in ([low, high], [high, low]):
        kept = finalise(items, 10)
        assert len(kept) == 1 and kept[0].relevance_score == 9.0


# --- 十: ordering, cap, summary -------------------------------------------------------------------


def test_order_is_score_then_unique_keywords_then_start() -> None:
    items = [
        snip("d", 50.0, ["a"], start=5),
        snip("c", 50.0, ["a", "b"], start=9),
        snip("b", 50.0, ["a"], start=1),
        snip("a", 80.0, ["a"], start=99),
    ]
    assert [s.content for s in order(items)] == ["a", "c", "b", "d"]


def test_snippet_settings_follow_the_seed_environment() -> None:
    fields = Settings.model_fields
    assert fields["search_max_snippets"].default == 10  # LDIMS_SEARCH_MAX_SNIPPETS
    assert fields["return_snippet_summary"].default is True  # LDIMS_RETURN_SNIPPET_SUMMARY
    assert fields["default_content_mode"].default == "smart_extract"
    assert Settings(search_max_snippets=1).search_max_snippets == 1
    assert Settings(search_max_snippets=50).search_max_snippets == 50
    for bad in (0, 51):
        with pytest.raises(ValidationError):
            Settings(search_max_snippets=bad)


def test_finalise_caps_the_number_of_snippets() -> None:
    items = [snip(f"snippet number {i} " + "z" * i * 7, float(i), ["z"], i * 100) for i in range(8)]
    out = finalise(items, 3)
    assert [s.relevance_score for s in out] == [7.0, 6.0, 5.0]
    assert len(finalise(items, 50)) == 8


@given(
    st.lists(
        st.tuples(st.sampled_from(["aa bb", "aa bb cc", "dd ee", "ff"]), st.integers(0, 4)),
        max_size=30,
    ),
    st.integers(1, 5),
)
def test_finalise_stops_early_with_the_same_result(items: list[tuple[str, int]], cap: int) -> None:
    """Near-duplicate removal stops once the cap is kept: the same snippets as checking all."""
    snippets = [snip(text, float(score), ["a"], i) for i, (text, score) in enumerate(items)]
    assert finalise(snippets, cap) == order(dedupe(snippets))[:cap]


@given(st.lists(st.tuples(st.integers(0, 300), st.sampled_from("aAbc")), max_size=40))
def test_near_keywords_counts_distinct_keywords_within_the_radius(
    spots: list[tuple[int, str]],
) -> None:
    matches = [Match(start, start + 1, kw) for start, kw in spots]
    expected = [
        len({x.keyword.lower() for x in matches if abs(x.start - m.start) <= 50}) for m in matches
    ]
    assert near_keywords(matches, 50) == expected


def test_summary_concatenates_top_snippets_and_shortens_long_ones() -> None:
    short = snip("The contract is signed.", 9, ["contract"])
    long_text = "Preamble words " * 30 + "the signing step needs approval " + "tail " * 40
    long = snip(long_text, 8, ["signing"], 300)
    text = summary([short, long])
    first, second = text.split(" … ", 1)
    assert first == "The contract is signed."
    assert "signing" in second and second.startswith("…") and second.endswith("…")
    assert len(second) <= SUMMARY_CHARS + 2


# --- semantic-only hits and offsets ----------------------------------------------------------


def test_chunk_without_keywords_gets_its_opening_to_a_sentence_end() -> None:
    sentences = [f"Sentence {i} talks about general policy matters." for i in range(20)]
    text = " ".join(sentences)
    src = SnippetSource(text, 0, len(text), 0, len(text), "f", "f.txt")
    [s] = make_snippets(src, [], context_chars=100, merge_overlapping=True, with_details=True)
    assert s.original_char_start == 0 and s.keywords_matched == []
    assert s.content.endswith(".") and 100 <= len(s.content) <= 200
    assert s.relevance_score == pytest.approx(50.0)  # only the position bonus
    assert s.scoring_details is not None and s.scoring_details.total_keywords == 0


def test_semantic_window_starts_at_the_hit_chunk() -> None:
    text = "Other chunk text. " * 10 + "The hit chunk begins here. It continues on."
    lo = text.index("The hit")
    src = SnippetSource(text, 0, len(text), lo, len(text), "f", "f.txt")
    [s] = make_snippets(src, [], context_chars=400, merge_overlapping=True, with_details=False)
    assert s.content == "The hit chunk begins here. It continues on."


def test_offsets_point_into_the_unit_text_after_base_adjustment() -> None:
    body = (
        "Intro paragraph about many things. " * 40
        + "合同的签署流程需要审批。The contract signing step is next. "
        + "Filler sentence without the words. " * 40
    )
    base = 900
    window = body[base : base + 1200]
    src = SnippetSource(window, base, len(body), 0, len(window), "f", "f.txt")
    matches = find_matches(window, extract_keywords("contract signing 合同签署"))
    out = make_snippets(src, matches, context_chars=60, merge_overlapping=True, with_details=True)
    assert out
    for s in out:
        assert body[s.original_char_start : s.original_char_end] == s.content
        assert s.scoring_details is not None
        assert s.scoring_details.percent_in_doc == pytest.approx(
            s.original_char_start / len(body), abs=1e-4
        )


def test_matches_outside_the_hit_chunk_do_not_make_snippets() -> None:
    text = "contract " + "x" * 300 + " the hit chunk has signing in it."
    lo = text.index("the hit")
    src = SnippetSource(text, 0, len(text), lo, len(text), "f", "f.txt")
    out = make_snippets(
        src,
        find_matches(text, ["contract", "signing"]),
        context_chars=10,
        merge_overlapping=True,
        with_details=False,
    )
    assert [s.keywords_matched for s in out] == [["signing"]]
