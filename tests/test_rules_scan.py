"""The compiled scanners (judge_service/judges/rules/_*.pyx) equal their Python
definitions: the plain-line links, a line's sentences, and the sentences' words for the
near-duplicate check. `.ci/run` sets JUDGE_REQUIRE_NATIVE=1: there the module must be
built, not skipped."""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge_service.judges.rules import plain_claims, repetition, rules_judge
from tests.test_rules_plain_claims import near_plain_lines, plain_lines
from tests.test_rules_repetition import traces

try:
    from judge_service.judges.rules import _plain, _sentences, _similar, _spans, _words
except ImportError:  # pragma: no cover - an install without a C compiler
    if os.environ.get("JUDGE_REQUIRE_NATIVE") == "1":
        raise
    pytest.skip("the compiled scanners are not built here", allow_module_level=True)

pytestmark = pytest.mark.native


def test_the_judge_runs_the_compiled_scanners() -> None:
    assert plain_claims.plain_links is _plain.plain_links
    assert rules_judge.line_sentences is _sentences.line_sentences
    assert rules_judge.disjoint_spans is _spans.disjoint_spans
    assert repetition._compiled_similar is _similar
    assert repetition._compiled is _words
    assert repetition.sentence_units(["a b c ", " e f g h"]).units == []  # too short
    words = "one two three four five six seven"
    found = repetition.sentence_units([words, words.upper() + "!"])
    assert found.repeats == [1] and found.units == [0] and found.ids.tolist() == list(range(7))


def same_links(line: str) -> None:
    native, python = _plain.plain_links(line), plain_claims.python_plain_links(line)
    assert native == python, line
    for a, b in zip(native or [], python or [], strict=True):
        assert type(a.left_value) is type(b.left_value) is int


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_plain_lines())
@pytest.mark.slow
def test_plain_links_near_the_grammar(line: str) -> None:
    same_links(line)


@settings(max_examples=1500, deadline=None)
@given(plain_lines())
@pytest.mark.slow
def test_plain_links_inside_the_grammar(line: str) -> None:
    same_links(line)


# Products past 64 bits (the compiled arithmetic is checked and falls back to Python's
# ints), sums that cancel, signs and a side of many operations.
big = st.integers(1, 999_999_999).map(str)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(big, min_size=1, max_size=12),
    st.sampled_from([" × ", " * ", " · ", " + ", " - ", " − "]),
    st.sampled_from(["", "-", "−", "+"]),
    st.lists(big, min_size=1, max_size=4),
)
def test_plain_links_past_64_bits(factors: list[str], op: str, sign: str, terms: list[str]) -> None:
    line = f"{sign}{op.join(factors)} - {' + '.join(terms)} = {' × '.join(reversed(factors))}"
    same_links(line)
    same_links(f"So {' × '.join(factors)} = {' × '.join(factors)} - 0, done.")


def test_a_product_past_64_bits_has_its_exact_value() -> None:
    nine = "999999999"
    links = _plain.plain_links(f"{nine} × {nine} × {nine} = 1")
    assert links is not None and links[0].left_value == 999_999_999**3 and not links[0].holds


# Sentences: the ends . ! ? 。, and whitespace beyond ASCII (str.isspace and the regex's
# \s are the same set; the compiled loop uses it too).
SENTENCE_CHARS = [*"ab .!?。", "Ab", " ", "  ", "\t", "\r", "\u3000", "\x85", "\x1c", "\u2028", "×"]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(SENTENCE_CHARS), max_size=30).map("".join))
@pytest.mark.slow
def test_sentences_of_a_line(line: str) -> None:
    assert _sentences.sentences(line) == rules_judge.python_sentences(line)


@settings(max_examples=1500, deadline=None)
@given(
    st.lists(st.sampled_from([*SENTENCE_CHARS, "\n", "\r\n", "\r", " \n"]), max_size=40).map(
        "".join
    )
)
def test_the_lines_and_sentences_of_a_text(text: str) -> None:
    assert _sentences.line_sentences(text) == rules_judge.python_line_sentences(text)


# Words: connectors between alphanumerics and not, underscores, case beyond ASCII
# ("İ" lowers to two chars, a final capital sigma lowers by context), digits of other
# scripts, astral letters.
WORD_CHARS = [
    *"aB9.,/^*+=_ -!\t",
    "Σ",
    "ΑΣ",
    "σ",
    "İ",
    "ß",
    "×",
    "·",
    "é",
    "𝐀",
    "😀",
    "٣",
    "Ⅻ",
    "ǅ",
]
WORD_CHARS += ["ﬁ", "\u0307", "the ", "river ", "x=1 ", "3.5 ", "Check "]


@st.composite
def sentence_lists(draw: st.DrawFn) -> list[str]:
    out = draw(st.lists(st.lists(st.sampled_from(WORD_CHARS), max_size=40).map("".join)))
    for _ in range(draw(st.integers(0, 3))):
        if out:
            out.append(draw(st.sampled_from(out)).swapcase())
    return out


def same_units(sentences: list[str]) -> None:
    native = repetition.sentence_units(sentences)
    python = repetition.python_sentence_units(sentences)
    assert native.repeats == python.repeats
    assert native.units == python.units
    assert native.ids.tolist() == python.ids.tolist()
    assert native.lengths == python.lengths
    assert native.vocabulary == python.vocabulary


@settings(max_examples=1500, deadline=None)
@given(sentence_lists())
@pytest.mark.slow
def test_sentence_units_of_any_text(sentences: list[str]) -> None:
    same_units(sentences)


@settings(max_examples=300, deadline=None)
@given(traces())
@pytest.mark.slow
def test_sentence_units_of_repetitive_traces(sentences: list[str]) -> None:
    same_units(sentences)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(-3, 12)), max_size=40))
def test_disjoint_spans_of_overlapping_ranges(ranges: list[tuple[int, int]]) -> None:
    firsts = [a for a, _ in ranges]
    lasts = [a + n for a, n in ranges]
    native = _spans.disjoint_spans(firsts, lasts)
    assert native == rules_judge.python_disjoint_spans(firsts, lasts)
    kept = sorted((start, end) for _, start, end in native)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(kept))  # disjoint


def test_disjoint_spans_refuses_ranges_of_two_lengths() -> None:
    with pytest.raises(ValueError):
        _spans.disjoint_spans([1, 2], [3])
    with pytest.raises(ValueError):
        rules_judge.python_disjoint_spans([1, 2], [3])


def test_a_crowded_word_table_hands_the_trace_to_the_definition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Words crafted to share the compiled table's hash bits would make its probing
    quadratic; past a budget of probes it gives up and the definition (a dict, keyed hash)
    answers. Here the budget is cut to nothing instead of crafting the words."""
    sentences = [f"word{k} and more words here {k % 7}" for k in range(200)] * 2
    words = repetition.MIN_CHARS, repetition.MIN_WORDS
    assert _words.sentence_units(sentences, *words, 0, 0) is None
    full = _words.sentence_units(sentences, *words, repetition.PROBES_PER_LOOKUP, 0)
    assert full is not None and len(full[1]) == 200  # ordinary text: inside, with no base
    monkeypatch.setattr(repetition, "PROBES_PER_LOOKUP", 0)
    monkeypatch.setattr(repetition, "BASE_PROBES", 0)
    same_units(sentences)
