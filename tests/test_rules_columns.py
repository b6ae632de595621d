"""Issue 39's columns on the arithmetic path equal what they replaced: the compiled cut of
ranges into disjoint spans (`_spans.disjoint_ranges`, over token positions) and its
definition, `shape_spans` given `SpanColumns` or the same spans as tuples, the token spans
of a trace's findings and the tuples built from them before, validation's char test of an
evidence quote's line (`TraceIndex.before_line`) and the token search it stands for, and
the compiled reader's numbers read from their chars (long ones, signs, decimals)."""

from __future__ import annotations

import itertools
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judge_service.evidence_index import TraceIndex
from judge_service.folding import FoldedText
from judge_service.grounding import TraceLinks
from judge_service.judges.base import JudgeRequest
from judge_service.judges.rules import reader, rules_judge, shape
from judge_service.judges.rules.reader import LinkKinds
from judge_service.judges.rules.repetition import repeated_sentences
from judge_service.judges.rules.shape import SpanColumns, TokenSpan
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.spans import SpanLimits
from judge_service.trace.decode import Trace
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.test_rules_reader import STATE, same_reading
from tests.test_rules_reader import traces as reader_traces
from tests.test_rules_shape import _shape, _shape_case

try:
    from judge_service.judges.rules import _spans
except ImportError:  # pragma: no cover - an install without a C compiler
    if os.environ.get("JUDGE_REQUIRE_NATIVE") == "1":
        raise
    _spans = None  # type: ignore[assignment]

native = pytest.mark.skipif(_spans is None, reason="the compiled scanners are not built here")


# Token-like ranges (the cut over positions), and now and then one far away (the
# definition's walk, for ranges over any span of ints).
_ranges = st.lists(
    st.tuples(st.integers(0, 60), st.integers(-3, 12), st.sampled_from([0] * 9 + [10**12])),
    max_size=40,
)


@native
@settings(max_examples=1500, deadline=None)
@given(_ranges)
def test_disjoint_ranges_equal_their_definition(ranges: list[tuple[int, int, int]]) -> None:
    firsts = [a + far for a, _, far in ranges]
    lasts = [a + far + n for a, n, far in ranges]
    expected = rules_judge.python_disjoint_spans(firsts, lasts)
    assert _spans.disjoint_spans(firsts, lasts) == expected
    index, start, end = rules_judge.disjoint_ranges(
        np.array(firsts, np.int64), np.array(lasts, np.int64)
    )
    assert list(zip(index.tolist(), start.tolist(), end.tolist(), strict=True)) == expected
    index, start, end = rules_judge.python_disjoint_ranges(
        np.array(firsts, np.int64), np.array(lasts, np.int64)
    )
    assert list(zip(index.tolist(), start.tolist(), end.tolist(), strict=True)) == expected
    kept = sorted((a, b) for _, a, b in expected)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(kept))  # disjoint


@native
def test_disjoint_ranges_refuse_ranges_of_two_lengths() -> None:
    with pytest.raises(ValueError):
        rules_judge.disjoint_ranges(np.array([1, 2], np.int64), np.array([3], np.int64))


@settings(max_examples=200, deadline=None)
@given(case=_shape_case(), max_per_line=st.sampled_from([0, 1, 2, 3]))
def test_shape_spans_of_columns_equal_those_of_tuples(
    case: tuple[Trace, list[TokenSpan], list[bool]], max_per_line: int
) -> None:
    trace, spans, blocked = case
    limits = SpanLimits(max_per_line=max_per_line, max_spans=12)
    mask = np.array(blocked, np.bool_)
    expected = _shape(trace, spans, blocked=mask, limits=limits)
    columns = SpanColumns.of(spans)
    assert [columns[i] for i in range(len(columns))] == spans
    assert _shape(trace, columns, blocked=mask, limits=limits) == expected  # type: ignore[arg-type]


def _old_token_spans(findings: list[Any], trace: Trace) -> list[TokenSpan]:
    """`to_token_spans` as it was: a tuple per span, by start."""
    order = sorted(
        range(len(findings)),
        key=lambda i: (
            rules_judge.PRIORITY.get(findings[i][2], 9),
            findings[i][0],
            -findings[i][1],
        ),
    )
    starts = [findings[i][0] for i in order]
    ends = [findings[i][1] for i in order]
    firsts, lasts = trace.tokens_for_char_ranges(starts, ends)
    spans = [
        TokenSpan(start, end, findings[order[i]][2], findings[order[i]][3])
        for i, start, end in rules_judge.python_disjoint_spans(firsts.tolist(), lasts.tolist())
    ]
    return sorted(spans)


_ARITHMETIC = (
    "19 × 74 = 1406.\n15 × 42 = 640.\nSo 50 + 640 = 690, 69 * 30 = 2070.\nWait, 15 × 42 = 630.\n"
    "So 640 is the part. 630 + 1 = 631\n15 × 42 = 630 and 42 × 15 = 630.\n\\boxed{631}"
)


def _request(tok: LoadedTokenizer, text: str) -> JudgeRequest:
    trace = tok.decode(tok.hf.encode(text, add_special_tokens=False))
    return JudgeRequest(
        rollout_id="t",
        trace=trace,
        problem="",
        final_answer=None,
        reward=0.0,
        reference_answer="630",
        reference_solution=None,
        label_scores=dict(DEFAULT_LABEL_SCORES),
    )


def test_token_spans_of_findings_equal_the_tuples_they_replaced(bpe: LoadedTokenizer) -> None:
    for text in (_ARITHMETIC, _ARITHMETIC * 30, "No claims here.", ""):
        request = _request(bpe, text)
        findings = rules_judge.read_trace(request).findings
        columns = rules_judge.to_token_spans(findings, request.trace)
        assert [columns[i] for i in range(len(columns))] == _old_token_spans(
            findings, request.trace
        )


@settings(max_examples=200, deadline=None)
@given(case=_shape_case())
def test_before_line_is_the_token_search_it_replaces(
    case: tuple[Trace, list[TokenSpan], list[bool]],
) -> None:
    trace = case[0]
    index = TraceIndex(trace, None)
    folded = index.folded
    for position in range(len(folded.text)):
        line = index.line_of(folded.token_at(position))
        for asked in range(-1, len(index.line_starts) + 2):
            assert index.before_line(position, asked) == (line < asked), (position, asked)


def test_the_reader_reads_long_numbers_signs_and_decimals_alike() -> None:
    same_reading(
        "123456789012345678 + 1 = 123456789012345679\n"
        "1234567890123456789 + 1 = 1234567890123456791\n"
        "So 1234567890123456791 and -1234567890123456791 are it. 1234567890123456790 + 1 = 7\n"
        "-0 + 0 = 1. So -0 and 1 and -1.\n"
        "0.5 + 0.25 = 0.75, so 0.75 × 4 = 3 and 12.50 - 0.5 = 12"
    )


_FOLD_PIECES = ["ab", " ", "  ", "\t\n", "½", "é", "ﬁ", "<<<", "⟦3⟧", "\x07", "数"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_FOLD_PIECES), max_size=80), st.randoms(use_true_random=True))
def test_folded_token_starts_are_the_search_they_replace(pieces: list[str], rng: Any) -> None:
    text = "".join(pieces) * rng.choice([1, 200])  # short (regexes) and long (numpy) folds
    cuts = sorted({0, len(text), *rng.sample(range(len(text) + 1), min(len(text), 50))})
    offsets = np.array(cuts, np.int64)
    folded = FoldedText.build(text, offsets)
    expected = np.searchsorted(folded.origin, offsets, side="left")
    assert folded.token_starts.tolist() == expected.tolist()


def _walks(cls: Any, text: str) -> tuple[Any, Any, LinkKinds, LinkKinds]:
    """`cls`'s reading of `text` through `read_lines` (links from `TraceLinks.links`) and
    through `read_text_lines`, with the kinds each walk gave."""
    found = rules_judge.line_sentences(text)
    flags = repeated_sentences([t for *_, sentences in found for *_, t in sentences])
    links = TraceLinks(text)
    by_method, by_text = cls(), cls()
    kinds, text_kinds = LinkKinds(), LinkKinds()
    by_method.read_lines(found, links.links, iter(flags), kinds)
    by_text.read_text_lines(text, links.line_starts(), found, iter(flags), text_kinds)
    return by_method, by_text, kinds, text_kinds


@settings(max_examples=150, deadline=None)
@given(reader_traces())
def test_reading_a_text_by_its_line_starts_is_reading_its_links(text: str) -> None:
    for cls in {reader.PythonReader, reader.new_reader}:
        by_method, by_text, kinds, text_kinds = _walks(cls, text + "\n" + _ARITHMETIC)
        for name in STATE:
            assert getattr(by_text, name) == getattr(by_method, name), name
        assert vars(text_kinds) == vars(kinds)


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from([*"a\n\r =1", "é", "数", "\U0001f600", "\u2028", "\x85"])))
def test_line_starts_are_where_each_newline_ends(text: str) -> None:
    starts = TraceLinks(text).line_starts()
    assert starts == [0, *(i + 1 for i, char in enumerate(text) if char == "\n")]
    assert len(starts) == len(text.split("\n"))


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.integers(0, 6), max_size=30), st.integers(-1, 5))
def test_crowded_is_a_run_longer_than_the_limit(steps: list[int], limit: int) -> None:
    # `shape._crowded` (the test that lets a trace with no crowded line skip the join and
    # the per-line cut) says what `_run_lengths` says, on ascending lines as the rows' are.
    line = np.cumsum(np.array([s if s < 4 else 0 for s in steps], np.int64))
    expected = bool((shape._run_lengths(line) > limit).any()) if line.shape[0] else False
    assert shape._crowded(line, limit) == expected
