"""What one judged rollout adds to its judge's tally, and what a shadow check adds.

Per result (every judged rollout, a cache hit excepted: it repeats a judgment already
counted): its status, the labels of its accepted spans, how many it has, its rejections
by code beside the accepted count, and its credit mass per token in signed log bins.

Per shadow check (a sample, off the request path): the rules judge's checker
(`grounding.LineChecks`, the walk the rules judge's own `invalid` spans come from) reads
the trace, and every span the judge submitted, accepted or rejected, is set against the
lines it proves false or true. ``shadow_agreement``: a false line the judge marked
negative and a true line it did not, against the others. ``shadow_integrity``: positive
credit on a false line and negative credit on a true line, against clean decided lines.
Rejected spans count: validation already refuses a positive span on a false line, so the
accepted spans alone would hide the very thing this measures.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

from judge_service.credit import FloatArray
from judge_service.drift.window import Tally
from judge_service.grounding import LineChecks
from judge_service.schemas import Result
from judge_service.trace import Trace

_SPAN_BINS = ((0, "0"), (1, "1"), (2, "2"), (3, "3-4"), (5, "5-8"), (9, "9+"))
_SPAN_LOWS = [low for low, _ in _SPAN_BINS]
_CREDIT_EDGES = (-0.1, -0.03, -0.01, -0.003, 0.0, 0.003, 0.01, 0.03, 0.1)
_CREDIT_NAMES = (
    "<-0.1",
    "-0.1..-0.03",
    "-0.03..-0.01",
    "-0.01..-0.003",
    "-0.003..0",
    "0..0.003",
    "0.003..0.01",
    "0.01..0.03",
    "0.03..0.1",
    ">0.1",
)


def credit_bin(mass_per_token: float) -> str:
    if mass_per_token == 0.0:
        return "0"
    return _CREDIT_NAMES[bisect.bisect_left(_CREDIT_EDGES, mass_per_token)]


def count_result(tally: Tally, result: Result, credit: FloatArray | None) -> None:
    # On the request path for every judged rollout: dict updates inline (Tally.add's
    # call per count was half the audit's cost on the rules judge).
    tally.n += 1
    counts = tally.counts
    status = counts.setdefault("status", {})
    status[result.status] = status.get(result.status, 0.0) + 1
    if result.status == "failed":
        return
    spans = result.spans
    if spans:
        labels = counts.setdefault("labels", {})
        for span in spans:
            labels[span.label] = labels.get(span.label, 0.0) + 1
    size = _SPAN_BINS[bisect.bisect_right(_SPAN_LOWS, len(spans)) - 1][1]
    bins = counts.setdefault("spans", {})
    bins[size] = bins.get(size, 0.0) + 1
    rejections = counts.setdefault("rejections", {})
    rejections["accepted"] = rejections.get("accepted", 0.0) + len(spans)
    if result.judge is not None:
        for code, count in result.judge.rejected.items():
            rejections[code] = rejections.get(code, 0.0) + count
    if credit is not None and result.num_tokens:
        mass = credit_bin(float(credit.sum()) / result.num_tokens)
        masses = counts.setdefault("credit", {})
        masses[mass] = masses.get(mass, 0.0) + 1


def submitted(result: Result) -> list[tuple[int, int, str]]:
    """Every span the judge submitted: accepted, and rejected ones whose range and label
    read as such (a rejected span is the judge's raw JSON: anything)."""
    out = [(s.start, s.end, s.label) for s in result.spans]
    for rejected in result.rejected_spans:
        raw: Mapping[str, Any] = rejected.span
        start, end, label = raw.get("start"), raw.get("end"), raw.get("label")
        if isinstance(start, int) and isinstance(end, int) and isinstance(label, str):
            out.append((start, end, label))
    return out


def shadow_tally(
    trace: Trace, spans: Sequence[tuple[int, int, str]], label_scores: Mapping[str, float]
) -> Tally:
    """The shadow measures of one judged trace (its judgment count is not in `n`)."""
    tally = Tally()
    checks = LineChecks.of(trace)
    false_lines = checks.false_lines
    true_lines = set(checks.true_lines())
    if not false_lines and not true_lines:
        return tally
    negative: set[int] = set()
    positive: set[int] = set()
    total = trace.num_tokens
    for start, end, label in spans:
        score = label_scores.get(label, 0.0)
        if score == 0.0 or not 0 <= start < end <= total:
            continue
        first, last = checks.lines_of(start, end)
        (negative if score < 0 else positive).update(range(first, last + 1))
    # Not scored (the policy's traces set it): the denominators of the shares reported.
    tally.add("shadow_lines", "false", len(false_lines))
    tally.add("shadow_lines", "true", len(true_lines))
    for line in false_lines:
        tally.add("shadow_agreement", "agree" if line in negative else "disagree")
        tally.add("shadow_integrity", "positive_on_false" if line in positive else "clean")
    for line in true_lines:
        tally.add("shadow_agreement", "disagree" if line in negative else "agree")
        tally.add("shadow_integrity", "negative_on_true" if line in negative else "clean")
    return tally
