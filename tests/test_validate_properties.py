"""Property tests of span validation over random traces and random, partly hostile span sets.

Whatever is submitted, validation never raises, every rejection carries a
known code, and every accepted span satisfies every rule of docs/design.md "Span
validation", checked here independently of the implementation's indexes
(plain per-span folding, the rules judge's link checker run per line).
"""

from __future__ import annotations

import itertools
from math import nan
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from judge_service.folding import fold
from judge_service.judges.rules.claims import find_links
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.spans import CODES, NEEDS_PRIOR_INVALID, REGION_LABELS, SpanLimits
from judge_service.trace import Trace
from judge_service.trace.markers import marker_positions
from judge_service.trace.tokenizer import LoadedTokenizer
from judge_service.validate import MIN_EVIDENCE_CHARS, validate_spans

LABELS = [*DEFAULT_LABEL_SCORES, "invalid", "invalid", "bogus"]
WORDS = [
    "Let", "me", "compute", "17 × 24", "= 408.", "= 418.", "3 + 4 = 7.", "3 + 4 = 8.",
    "Wait,", "no.", "⟦12⟧", "<<<", ">>>", "é", "ﬁne", "  ", "数学", "\\boxed{408}", "x",
]  # fmt: skip
LIMITS = SpanLimits(max_point_tokens=24, max_region_share=0.5, max_spans=12)


@st.composite
def traces_and_spans(draw: st.DrawFn, bpe: LoadedTokenizer) -> tuple[Trace, list[Any]]:
    lines = draw(
        st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=14), min_size=1, max_size=8)
    )
    text = "\n".join(" ".join(words) for words in lines)
    trace = bpe.decode(bpe.hf.encode(text, add_special_tokens=False))
    n = trace.num_tokens
    spans: list[Any] = []
    for _ in range(draw(st.integers(0, 16))):
        if draw(st.integers(0, 5)) == 0:  # hostile bounds, sometimes
            start = draw(st.integers(-2, n))
            end = draw(st.integers(start - 1, n + 2))
        else:
            start = draw(st.integers(0, max(0, n - 1)))
            end = min(max(n, 1), start + draw(st.integers(1, 40)))
        lo, hi = max(0, min(start, n)), max(0, min(end, n))
        inside = trace.span_text(lo, hi) if lo < hi else ""
        quote_from = draw(st.sampled_from(["head", "head", "head", "span", "trace", "junk"]))
        if quote_from == "head":
            evidence = inside[: draw(st.integers(8, 40))]
        elif quote_from == "span":
            a = draw(st.integers(0, max(0, len(inside))))
            evidence = inside[a : a + draw(st.integers(0, 40))]
        elif quote_from == "trace":
            b = draw(st.integers(0, len(trace.text)))
            evidence = trace.text[b : b + draw(st.integers(0, 40))]
        else:
            evidence = draw(st.text(max_size=20))
        confidence = draw(st.floats(0.0, 1.0))
        if draw(st.integers(0, 7)) == 0:
            confidence = draw(st.sampled_from([-0.1, 1.5, nan]))
        span: dict[str, Any] = {
            "start": start,
            "end": end,
            "label": draw(st.sampled_from(LABELS)),
            "confidence": confidence,
            "evidence": evidence,
        }
        if draw(st.booleans()):
            span["evidence_end"] = inside[-draw(st.integers(1, 30)) :] if inside else "x"
        malformed = draw(st.integers(0, 9))
        spans.append(span if malformed else draw(st.sampled_from(["not a span", {"start": "0"}])))
    return trace, spans


def _blocked_tokens(trace: Trace) -> list[tuple[int, int]]:
    """For each false link (the checker run per line), the tokens of every marker line it
    touches: no positive span may touch them, however it cuts the claim."""
    markers = [*marker_positions(trace), trace.num_tokens]
    found, base = [], 0
    for line in trace.text.split("\n"):
        for link in find_links(line):
            if not link.holds and not link.trivial:
                a, b = trace.tokens_for_chars(base + link.left_start, base + link.right_end)
                first = max(i for i, m in enumerate(markers) if m <= a)
                last = max(i for i, m in enumerate(markers) if m <= b - 1)
                found.append((markers[first], markers[last + 1]))
        base += len(line) + 1
    return found


def _check_accepted(trace: Trace, spans: list[Any]) -> None:
    n = trace.num_tokens
    lines = marker_positions(trace)

    def line_of(token: int) -> int:
        return max(i for i, start in enumerate(lines) if start <= token)

    def chars(token: int) -> int:
        return int(trace.offsets[token])

    per_line: dict[int, int] = {}
    for span in spans:
        assert 0 <= span.start < span.end <= n
        assert span.label in DEFAULT_LABEL_SCORES and 0.0 <= span.confidence <= 1.0
        length = span.end - span.start
        if span.label in REGION_LABELS:
            assert length <= max(1, int(LIMITS.max_region_share * n))
        else:
            assert length <= LIMITS.max_point_tokens
            if length > max(1, n // 2):  # over half the trace: only a step of one line
                assert "\n" not in trace.span_text(span.start, span.end).rstrip()
        inside = fold(trace.span_text(span.start, span.end), quote=False)
        quote = fold(span.evidence)
        assert quote in inside and len(quote) >= min(MIN_EVIDENCE_CHARS, len(inside))
        # Anchoring, as a necessary condition on plain text: the quote fits between the
        # span's start and the end of its second line (plus the quote's own length).
        first = line_of(span.start)
        limit = lines[first + 2] if first + 2 < len(lines) else n
        head = trace.text[chars(span.start) : min(chars(span.end), chars(limit) + 4 * len(quote))]
        assert quote in fold(head, quote=False)
        end_quote = fold(span.evidence_end) if span.evidence_end is not None else quote
        last = line_of(span.end - 1)
        low = lines[max(0, last - 1)]
        tail = trace.text[max(chars(span.start), chars(low) - 4 * len(end_quote)) : chars(span.end)]
        assert end_quote in fold(tail, quote=False)
        if DEFAULT_LABEL_SCORES[span.label] > 0:
            assert not any(span.start < y and x < span.end for x, y in _blocked_tokens(trace))
        per_line[first] = per_line.get(first, 0) + 1
    assert all(count <= LIMITS.max_per_line for count in per_line.values())
    ordered = sorted(spans, key=lambda s: s.start)
    assert all(x.end <= y.start for x, y in itertools.pairwise(ordered))
    regions = sum(s.end - s.start for s in spans if s.label in REGION_LABELS)
    assert regions <= max(1, int(LIMITS.max_region_share * n))  # one budget for all
    # Each correction has an invalid of its own before it (scoring: confidence >= 0.5);
    # taken in order of start, any free one will do.
    free = sorted(o.end for o in spans if o.label == "invalid" and o.confidence >= 0.5)
    for span in ordered:
        if span.label in NEEDS_PRIOR_INVALID:
            assert free and free[0] <= span.start
        if span.label == "verified_correction":
            free.remove(max(e for e in free if e <= span.start))


def test_validation_holds_every_rule_on_random_submissions(bpe: LoadedTokenizer) -> None:
    @settings(
        max_examples=250,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(traces_and_spans(bpe))
    def check(case: tuple[Trace, list[Any]]) -> None:
        trace, spans = case
        report = validate_spans(spans, trace, DEFAULT_LABEL_SCORES, limits=LIMITS)
        assert len(report.accepted) + len(report.rejected) == len(spans)
        assert all(r.code in CODES and r.reason for r in report.rejected)
        assert len(report.accepted) <= LIMITS.max_spans
        _check_accepted(trace, report.accepted)

    check()
