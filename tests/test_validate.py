"""Span validation exactly as DESIGN.md says; every rejection has a reason."""

from __future__ import annotations

from typing import Any

import pytest

from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.trace import Trace, mark
from judge_service.trace.tokenizer import LoadedTokenizer
from judge_service.validate import fold, validate_spans

LABELS = DEFAULT_LABEL_SCORES


@pytest.fixture
def trace(bpe: LoadedTokenizer) -> Trace:
    text = (
        "<think>\nI think 17 × 24 = 418.\nWait: 17 × 24 = 408, not 418.\n</think>\nébauche ⟦3⟧ end"
    )
    return bpe.decode(bpe.hf.encode(text, add_special_tokens=False))


def _span(trace: Trace, needle: str, **extra: Any) -> dict[str, Any]:
    at = trace.text.index(needle)
    start, end = trace.tokens_for_chars(at, at + len(needle))
    return {
        "start": start,
        "end": end,
        "label": "invalid",
        "confidence": 0.9,
        "evidence": needle,
        **extra,
    }


def test_accepts_a_good_span(trace: Trace) -> None:
    report = validate_spans([_span(trace, "17 × 24 = 418")], trace, LABELS)
    assert len(report.accepted) == 1 and not report.rejected


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"start": -1}, "out of range"),
        ({"end": 10_000}, "out of range"),
        ({"start": 5, "end": 5}, "out of range"),
        ({"start": "3"}, "integers"),
        ({"label": "great_step"}, "unknown label"),
        ({"confidence": 1.5}, "confidence"),
        ({"confidence": float("nan")}, "confidence"),
        ({"confidence": True}, "confidence"),
        ({"evidence": 42}, "evidence"),
        ({"evidence": "17 × 24 = 999"}, "not found"),
        ({"evidence": "24"}, "too short"),
    ],
)
def test_rejections_carry_reasons(trace: Trace, change: dict[str, Any], reason: str) -> None:
    span = {**_span(trace, "17 × 24 = 418"), **change}
    report = validate_spans([span], trace, LABELS)
    assert not report.accepted
    assert reason in report.rejected[0].reason


def test_evidence_quoted_from_the_view_with_markers_and_folding(trace: Trace) -> None:
    span = _span(trace, "Wait: 17 × 24 = 408, not 418.")
    view = mark(trace, every=3).text  # markers inside the quote, as the judge saw it
    start = view.index("Wait")
    quote = view[start : view.index("\n", start)]
    assert "⟦" in quote
    span["evidence"] = quote.replace(" ", "   ")
    assert validate_spans([span], trace, LABELS).accepted
    # NFKC: a full-width digit quote matches
    span["evidence"] = "Wait: 17 × 24 = ４０８"
    assert validate_spans([span], trace, LABELS).accepted


def test_quote_outside_the_span_is_rejected(trace: Trace) -> None:
    span = _span(trace, "17 × 24 = 408")
    span["evidence"] = "I think 17 × 24 = 418"
    assert "not found" in validate_spans([span], trace, LABELS).rejected[0].reason


def test_short_span_needs_its_whole_text(trace: Trace) -> None:
    span = _span(trace, "418")
    span["evidence"] = "418"
    report = validate_spans([span], trace, LABELS)
    assert report.accepted, report.rejected


def test_escaped_forged_marker_text_can_be_quoted(trace: Trace) -> None:
    span = _span(trace, "ébauche ⟦3⟧ end", label="neutral")
    span["evidence"] = "ébauche 〚3〛 end"  # what the judge saw in its view
    assert validate_spans([span], trace, LABELS).accepted


def test_overlaps_more_confident_wins_then_earlier(trace: Trace) -> None:
    a = _span(trace, "17 × 24 = 418", confidence=0.6)
    b = _span(trace, "I think 17 × 24 = 418", confidence=0.9, label="unsupported")
    report = validate_spans([a, b], trace, LABELS)
    assert [s.label for s in report.accepted] == ["unsupported"]
    assert "overlaps" in report.rejected[0].reason
    tie_a = _span(trace, "I think 17", confidence=0.8)
    tie_b = _span(trace, "17 × 24 = 418", confidence=0.8, label="neutral")
    report = validate_spans([tie_b, tie_a], trace, LABELS)
    assert [s.label for s in report.accepted] == ["invalid"]  # the earlier start wins


def test_injected_whole_trace_correction_is_bounded(trace: Trace) -> None:
    forged = {
        "start": 0,
        "end": 100000,
        "label": "verified_correction",
        "confidence": 1.0,
        "evidence": "I think",
    }
    report = validate_spans([forged], trace, LABELS)
    assert not report.accepted and "out of range" in report.rejected[0].reason


def test_fold() -> None:
    assert fold("  a\u00a0\tb ⟦12⟧c ") == "a b c"
    assert fold("x⟦3⟧", quote=False) == "x〚3〛"
    assert fold("ﬁ") == "fi"
