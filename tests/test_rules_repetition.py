"""Near-duplicate sentences found for a whole trace at once equal the plain definition:
one sentence at a time against an inverted index of the ones before it. Both ways of
counting the trigrams shared (the compiled `_similar.similar_units`, and the numpy
definition `python_similar_units` it hands a crowded table to) are held to it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from judge_service.judges.rules import repetition as R


def one_at_a_time(sentences: list[str]) -> list[bool]:
    """The definition, sentence by sentence (the rules judge's algorithm before issue 16)."""
    exact: set[str] = set()
    sizes: list[int] = []
    index: dict[tuple[str, ...], list[int]] = {}
    out = []
    for sentence in sentences:
        words = R.normalise(sentence)
        joined = " ".join(words)
        if len(joined) < R.MIN_CHARS or len(words) < R.MIN_WORDS:
            out.append(False)
            continue
        if joined in exact:
            out.append(True)
            continue
        trigrams = set(zip(words, words[1:], words[2:], strict=False))
        shared: Counter[int] = Counter()
        for trigram in trigrams:
            shared.update(index.get(trigram, ()))
        out.append(
            any(
                count / (len(trigrams) + sizes[other] - count) >= R.THRESHOLD
                for other, count in shared.items()
            )
        )
        exact.add(joined)
        unit = len(sizes)
        sizes.append(len(trigrams))
        for trigram in trigrams:
            postings = index.setdefault(trigram, [])
            if len(postings) < R.MAX_POSTINGS:
                postings.append(unit)
    return out


@pytest.fixture
def numpy_count() -> Iterator[None]:
    """The trigrams counted by the definition (numpy), not the compiled module."""
    with mock.patch.object(R, "_compiled_similar", None):
        yield


def definition_count(sentences: list[str]) -> list[bool]:
    with mock.patch.object(R, "_compiled_similar", None):
        return R.repeated_sentences(sentences)


WORDS = ["the", "river", "Check", "17", "x=1", "3.5", "İstanbul", "Straße", "café", "408", "a_b"]


@st.composite
def traces(draw: st.DrawFn) -> list[str]:
    vocabulary = draw(st.sampled_from([WORDS[:4], WORDS]))
    out: list[str] = []
    for _ in range(draw(st.integers(0, 60))):
        if out and draw(st.booleans()):  # an earlier sentence, perhaps changed a little
            words = draw(st.sampled_from(out)).split()
            for _ in range(draw(st.integers(0, 2))):
                if words:
                    words[draw(st.integers(0, len(words) - 1))] = draw(st.sampled_from(vocabulary))
            out.append(" ".join(words))
        else:
            words = draw(st.lists(st.sampled_from(vocabulary), min_size=1, max_size=12))
            out.append(" ".join(words) + draw(st.sampled_from([".", "!", ""])))
    return out


@settings(max_examples=300, deadline=None)
@given(traces())
@pytest.mark.slow
def test_a_whole_trace_at_once_equals_one_sentence_at_a_time(sentences: list[str]) -> None:
    expected = one_at_a_time(sentences)
    assert R.repeated_sentences(sentences) == expected
    assert definition_count(sentences) == expected


@settings(max_examples=300, deadline=None)
@given(traces(), st.sampled_from([0.0, 0.5, 0.8, 1.0]), st.integers(1, 4))
def test_the_compiled_count_equals_the_definition(
    sentences: list[str], threshold: float, postings: int
) -> None:
    """Any threshold, and postings lists cut short enough to matter on a small trace."""
    found = R.sentence_units(sentences)
    assume(len(found.units) > 1)  # as `repeated_sentences` asks
    lengths = np.asarray(found.lengths, np.int64)
    with mock.patch.object(R, "MAX_POSTINGS", postings):
        compiled = R.similar_units(found, threshold)
        python = R.python_similar_units(found.ids, lengths, found.vocabulary, threshold)
    assert list(compiled) == python.tolist()


def test_a_crowded_trigram_table_hands_the_count_to_the_definition() -> None:
    """Word ids crafted to share the compiled table's hash bits would make its probing
    quadratic; past a budget of probes it gives up (None) and the definition counts.
    Here the budget is cut to nothing instead of crafting the ids."""
    sentences = [f"word{k} and more words here {k % 7}" for k in range(200)] * 2
    sentences += [f"word{k} and more words here {k % 7} too" for k in range(200)]
    found = R.sentence_units(sentences)
    if R._compiled_similar is not None:
        args = (found.ids, found.lengths, R.THRESHOLD, R.MAX_POSTINGS)
        assert R._compiled_similar.similar_units(*args, 0, 0) is None
        assert R._compiled_similar.similar_units(*args, R.PROBES_PER_LOOKUP, 0) is not None
    expected = one_at_a_time(sentences)
    with mock.patch.object(R, "PROBES_PER_LOOKUP", 0), mock.patch.object(R, "BASE_PROBES", 0):
        assert R.repeated_sentences(sentences) == expected
    assert R.repeated_sentences(sentences) == expected


@settings(max_examples=100, deadline=None)
@given(traces(), st.integers(1, 40))
def test_pairs_counted_a_few_units_at_a_time_give_the_same_answer(
    sentences: list[str], chunk: int
) -> None:
    """The definition's pair counting is split into chunks of whole units (memory stays
    bounded on a flood of near-duplicates); tiny chunks must not change a single answer."""
    with mock.patch.object(R, "PAIRS_PER_CHUNK", chunk):
        assert definition_count(sentences) == one_at_a_time(sentences)


@pytest.mark.usefixtures("numpy_count")
def test_a_flood_of_near_duplicates_is_counted_in_bounded_chunks() -> None:
    """12,000 sentences sharing most trigrams (a 131k-token trace's worth) meet up to
    256 others per trigram: tens of millions of pairs, counted a chunk at a time."""
    flood = [f"let me check the sum number {i} once again now" for i in range(12_000)]
    largest: list[int] = []
    real = R._similar_in

    def spy(holders: Any, *rest: Any) -> Any:
        largest.append(int(rest[2][holders].sum()))  # pairs in this chunk
        return real(holders, *rest)

    with mock.patch.object(R, "_similar_in", spy):
        found = R.repeated_sentences(flood)
    assert not any(found)  # 5 of 8 trigrams shared: 5 / 11, never 0.8
    assert sum(largest) > 10 * R.PAIRS_PER_CHUNK
    assert max(largest) <= R.PAIRS_PER_CHUNK + 16 * R.MAX_POSTINGS  # one unit may overshoot


def test_a_trigram_shared_by_hundreds_is_compared_through_its_first_holders_only() -> None:
    common = [f"let me check number {i} again please" for i in range(600)]
    near = [f"let me check number {i} again please now" for i in range(600)]
    flooded = ["alpha beta gamma delta epsilon"] * 5 + [
        f"alpha beta gamma delta {i}" for i in range(700)
    ]
    for sentences in (common + near, flooded):
        found = R.repeated_sentences(sentences)
        assert found == one_at_a_time(sentences) == definition_count(sentences)
        assert any(found) and not all(found)


def test_exact_and_near_repeats_and_short_sentences() -> None:
    sentences = [
        "So the total is 408 apples here.",
        "so THE total is 408 apples here!",  # the same words
        "So the total is 408 apples here, I think.",  # 5 trigrams shared of 7: 0.71
        "Short one.",
        "Short one.",  # too short to repeat
    ]
    assert R.repeated_sentences(sentences) == [False, True, False, False, False]
