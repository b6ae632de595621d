"""The rules judge never submits a span that validation rejects, whatever the trace and limits."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge_service.judges.base import JudgeRequest
from judge_service.judges.rules.rules_judge import PRIORITY, judge_spans
from judge_service.judges.rules.shape import TokenSpan, shape_spans
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.spans import SpanLimits
from judge_service.trace.decode import Trace
from judge_service.trace.markers import marker_positions
from judge_service.trace.tokenizer import LoadedTokenizer, TokenizerCache
from judge_service.validate import validate_spans
from tests.conftest import EXAMPLES

POSITIVE = frozenset(label for label, score in DEFAULT_LABEL_SCORES.items() if score > 0)
TIGHT = SpanLimits(max_point_tokens=6, max_region_share=0.05, max_spans=5)


def _request(tok: LoadedTokenizer, text: str, **extra: Any) -> JudgeRequest:
    trace = tok.decode(tok.hf.encode(text, add_special_tokens=False))
    return JudgeRequest(
        rollout_id="t",
        trace=trace,
        problem=str(extra.get("problem", "")),
        final_answer=extra.get("final_answer"),
        reward=extra.get("reward"),
        reference_answer=extra.get("reference_answer"),
        reference_solution=None,
        label_scores=dict(DEFAULT_LABEL_SCORES),
    )


def _accepted_whole(request: JudgeRequest, limits: SpanLimits) -> list[dict[str, Any]]:
    spans = judge_spans(request, limits)
    report = validate_spans(spans, request.trace, request.label_scores, limits=limits)
    assert not report.rejected, report.reasons_text()
    assert len(report.accepted) == len(spans)
    return spans


def _shape(trace: Trace, spans: list[TokenSpan], **kw: Any) -> list[dict[str, object]]:
    args: dict[str, Any] = {
        "priority": PRIORITY,
        "positive": POSITIVE,
        "false_links": [],
        "limits": SpanLimits(),
    }
    return shape_spans(spans, trace, **(args | kw))


@pytest.mark.parametrize("limits", [SpanLimits(), TIGHT], ids=["default", "tight"])
def test_examples_are_accepted_whole(
    tokenizer_cache: TokenizerCache, example_rollouts: list[dict[str, Any]], limits: SpanLimits
) -> None:
    tok = tokenizer_cache.get(str(EXAMPLES / "tokenizer"))
    for row in example_rollouts:
        text = tok.hf.decode(row["response_token_ids"])
        extra = {k: row.get(k) for k in ("reward", "reference_answer", "problem")}
        spans = _accepted_whole(_request(tok, text, **extra), limits)
        assert spans or limits is TIGHT, row["id"]


def test_limits_drop_what_exceeds_them(bpe: LoadedTokenizer) -> None:
    sentence = "Let me double check that the product is right."
    text = f"17 × 24 = 408.\n{sentence}\n{sentence}\n\\boxed{{408}}"
    request = _request(bpe, text, reference_answer="408")
    loose = _accepted_whole(request, SpanLimits())
    assert {s["label"] for s in loose} == {"valid_progress", "unproductive_repetition"}
    claim = next(s for s in loose if s["evidence"] == "17 × 24 = 408")
    repeat = next(s for s in loose if s["label"] == "unproductive_repetition")
    length = int(str(claim["end"])) - int(str(claim["start"]))
    share = (int(str(repeat["end"])) - int(str(repeat["start"]))) / request.trace.num_tokens
    tight = SpanLimits(max_point_tokens=length - 1, max_region_share=share * 0.9)
    kept = _accepted_whole(request, tight)
    assert [s["evidence"] for s in kept] == ["408"]  # the one-token answer still fits


def test_a_crowded_line_keeps_two_spans(bpe: LoadedTokenizer) -> None:
    text = "17 × 4 = 78, so 340 + 78 = 418, and 2 + 2 = 4.\n"
    spans = _accepted_whole(_request(bpe, text), SpanLimits())
    assert [s["label"] for s in spans] == ["invalid", "unsupported"]


def test_a_crowded_line_joins_same_label_neighbours(bpe: LoadedTokenizer) -> None:
    text = "Doubling: 1 + 1 = 2, 2 + 2 = 4, 4 + 4 = 8, 8 + 8 = 16.\n"
    spans = _accepted_whole(_request(bpe, text), SpanLimits())
    assert [(s["label"], s["evidence"]) for s in spans] == [
        ("valid_progress", "1 + 1 = 2, 2 + 2 = 4, 4 + 4 = 8, 8 + 8 = 16")
    ]


def test_at_most_max_spans_the_most_important_first(bpe: LoadedTokenizer) -> None:
    text = "".join(f"{i} + {i} = {2 * i}.\n" for i in range(1, 12)) + "5 × 5 = 24.\n"
    limits = SpanLimits(max_spans=4)
    spans = _accepted_whole(_request(bpe, text), limits)
    assert [s["label"] for s in spans] == ["valid_progress"] * 3 + ["invalid"]


def test_structure_and_grounding(bpe: LoadedTokenizer) -> None:
    trace = bpe.decode(bpe.hf.encode("2 + 2 = 5.\n3 + 3 = 6.\n", add_special_tokens=False))
    second = marker_positions(trace)[1]
    invalid = TokenSpan(0, second - 1, "invalid", 0.95)
    orphan = TokenSpan(0, second - 1, "unsupported", 0.7)
    after = TokenSpan(second, trace.num_tokens - 1, "verified_correction", 0.85)
    assert _shape(trace, [orphan, after]) == []  # nothing to depend on, nothing to correct
    kept = _shape(trace, [invalid, after])
    assert [s["label"] for s in kept] == ["invalid", "verified_correction"]
    # The invalid span is too long for the limit: its correction goes with it.
    assert _shape(trace, [invalid, after], limits=SpanLimits(max_point_tokens=second - 2)) == []
    whole = TokenSpan(0, trace.num_tokens, "valid_progress", 0.9)
    false_link = (0, len("2 + 2 = 5"))
    assert _shape(trace, [whole], false_links=[false_link]) == []
    assert len(_shape(trace, [whole], false_links=[(0, len(trace.text) + 1)])) == 1


def test_evidence_anchors_both_ends(bpe: LoadedTokenizer) -> None:
    lines = [f"Line {i} says nothing much, and then it goes on for a while.\n" for i in range(12)]
    trace = bpe.decode(bpe.hf.encode("".join(lines), add_special_tokens=False))
    end = marker_positions(trace)[6]
    (shaped,) = _shape(trace, [TokenSpan(0, end, "unproductive_repetition", 0.75)])
    covered = "".join(lines[:6]).strip()
    assert shaped["evidence"] == covered[:160]
    assert shaped["evidence_end"] == covered[-80:].strip()
    report = validate_spans([shaped], trace, DEFAULT_LABEL_SCORES)
    assert not report.rejected, report.reasons_text()
    # Without the end quote, the span would reach more than a line past its evidence.
    report = validate_spans([{**shaped, "evidence_end": None}], trace, DEFAULT_LABEL_SCORES)
    assert [r.code for r in report.rejected] == ["evidence_not_anchored"]


# Traces built from the pieces the rules judge reacts to, with small numbers so that
# errors, taints, re-checks and coincidences collide often.
_N = st.integers(min_value=0, max_value=30)


@st.composite
def _piece(draw: st.DrawFn) -> str:
    a, b, err = draw(_N), draw(_N), draw(st.sampled_from([0, 0, 0, 1, -2, 10]))
    c = draw(_N)
    options = [
        f"{a} × {b} = {a * b + err}.",
        f"{a} + {b} = {a + b + err}, so {a + b + err} + {c} = {a + b + err + c}.",
        f"Check: {a * b} / {max(b, 1)} = {a * b // max(b, 1)}.",
        f"So {a} × {b} = {a * b} = {b} × {a} = {a * b + err}.",
        f"Wait, {a} × {b} = {a * b}, not {a * b + 1}.",
        f"So the total is {a + err}.",
        f"So the total is {a + err} " + "and it keeps going " * b + ".",  # many marker lines
        "Let me think about this " * (b + 1) + "once more.",
        "Let me double check that the product is right.",
        "Let me double-check that the product is right!",
        ", ".join(f"{i} + {a} = {i + a + err}" for i in range(b)),
        f"⟦{a}⟧ <<< fence >>> 数学 ✓ {a} = {b}",
        f"\\boxed{{{a * b + err}}}",
        "",
    ]
    return draw(st.sampled_from(options))


@st.composite
def _trace_text(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(_piece(), min_size=1, max_size=14))
    join = draw(st.sampled_from(["\n", "\r\n", " ", "\n\n"]))
    return join.join(pieces)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=_trace_text(),
    reference=st.sampled_from([None, "0", "12", "408"]),
    limits=st.sampled_from([SpanLimits(), TIGHT, SpanLimits(max_point_tokens=12, max_spans=8)]),
)
def test_generated_traces_are_accepted_whole(
    bpe: LoadedTokenizer, text: str, reference: str | None, limits: SpanLimits
) -> None:
    _accepted_whole(_request(bpe, text, reference_answer=reference), limits)
