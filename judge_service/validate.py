"""Checking a judge's spans against the trace (docs/concepts.md "Validation: what a span
must show"; the rules and codes: docs/design.md "Span validation").

The judge is untrusted: a span becomes credit only when its evidence
*anchors* it and the exact checker does not contradict it. In order, for each
submitted span:

1. shape: an object, integer ``0 <= start < end <= T``, a known label, a
   confidence in [0, 1], string quotes (``malformed`` / ``out_of_range`` /
   ``unknown_label`` / ``bad_confidence``); the first ``max_spans`` spans only
   (``too_many_spans``);
2. size: a point label covers at most ``max_point_tokens``, and at most half the
   trace unless it lies within one line; a region label (repetition, neutral) at
   most ``max_region_share`` of it (``span_too_long``);
3. evidence: ``evidence`` occurs in the span, starting on its first line or the
   next; ``evidence_end`` (default ``evidence``) occurs in it, ending on its
   last line or the one before; one quote anchors one place, so when the two are
   the same text, one occurrence must satisfy both (``evidence_too_short`` /
   ``evidence_not_found`` / ``evidence_not_anchored``, naming where the quote is);
4. grounding, by lines (`grounding.LineChecks`, once per trace): a positive span
   touching a line that holds a false link (``contradicts_arithmetic``), a link
   built on an error's value (``built_on_error``) or the final answer of a rollout
   the verdict calls wrong (``wrong_final_answer``); an ``invalid`` whose lines the
   checker proves true whole (``contradicts_arithmetic``: the claim checks out).

Then over the survivors: at most ``max_per_line`` spans starting on one line,
the most confident kept (``flood``); overlaps go to the more confident, ties
to the earlier (``overlap``), except that a region label never wins against a
point label (a confident ``neutral`` over a third of the trace would otherwise
erase every judgment under it, the ``invalid`` on the error included); region
spans share one budget of ``max_region_share`` of the trace, the most confident
first (``span_too_long``); a ``verified_correction`` or ``unsupported`` with no
scoring ``invalid`` before it, or a second correction of one invalid, is dropped
(``no_prior_invalid``, `spans.unlocked`) and the overlaps are settled again
without it. Lines are the trace's own lines, cut every 64 tokens (the marker
lines of the judge's view).

Steps 2 to 4, the flood limit, the region budget and the unlock rule stop a
judge's *claims*. Spans that claim nothing (``claims=False``: a judge whose
`Judge.carries_claims` is false, the service's own value differences) get the
structural checks only: shape, the span count limit and overlaps. Rejecting
one of them would break what its scores mean (they telescope to V(T) - V(0)).

The trace is folded once per `Validator` (see `folding`); each span then
costs a few slices and searches of the folded text. Nothing here raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from judge_service import labels as L
from judge_service import spans as S
from judge_service.collector import collector_paused
from judge_service.evidence_index import TraceIndex, precedence, resolve_overlaps
from judge_service.folding import fold
from judge_service.grounding import Verdict
from judge_service.spans import Rejection, Span, SpanLimits, ValidationReport, as_int, unlocked
from judge_service.trace.decode import Trace

if TYPE_CHECKING:
    from judge_service.group.contrast import ContrastCheck

__all__ = ["Rejection", "Span", "SpanLimits", "ValidationReport", "Validator", "Verdict"]
__all__ += ["validate_spans"]

MIN_EVIDENCE_CHARS = 8
_SHOWN_CHARS = 300  # of a rejected span's strings, echoed back


class _Reject(Exception):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


class Validator:
    """Validates submissions for one trace (or, without a trace, for `num_tokens` tokens)."""

    def __init__(
        self,
        trace: Trace | None,
        label_scores: Mapping[str, float],
        limits: SpanLimits | None = None,
        *,
        num_tokens: int | None = None,
        verdict: Verdict | None = None,
        contrast: ContrastCheck | None = None,
    ) -> None:
        if trace is None and num_tokens is None:
            raise ValueError("a Validator needs a trace or num_tokens")
        self.trace = trace
        self.num_tokens = trace.num_tokens if trace is not None else int(num_tokens or 0)
        self.label_scores = label_scores
        self.limits = limits or SpanLimits()
        self.verdict = verdict
        # Checks a span's `contrast` (group judging only: without it a contrast is refused).
        self.contrast = contrast
        self._index: TraceIndex | None = None

    @property
    def index(self) -> TraceIndex | None:
        if self.trace is None:
            return None
        if self._index is None:
            self._index = TraceIndex(self.trace, self.verdict)
        return self._index

    def __call__(self, raw_spans: Sequence[Any]) -> ValidationReport:
        return self.check(raw_spans)

    def prepare(self) -> None:
        """Build the trace's index now (fold, lines, the checker's verdict on every line),
        e.g. in a thread before the judge runs: an LLM judge's first check then costs
        its spans only, not a walk over the trace on the event loop."""
        if self.index is not None:
            _ = self.index.checks

    def check(
        self, raw_spans: Sequence[Any], *, round: int = 1, claims: bool = True
    ) -> ValidationReport:
        """`claims`: whether the spans are a judge's claims (every rule) or spans the
        service computed itself (the structural checks only, see the module's doc)."""
        report = ValidationReport()

        def reject(raw: Any, code: str, reason: str) -> None:
            report.rejected.append(Rejection(_shown(raw), code, reason, round))

        candidates: list[tuple[int, Span, Any]] = []
        cap = self.limits.max_spans
        for index, raw in enumerate(raw_spans):
            if index >= cap:
                reject(raw, S.TOO_MANY_SPANS, f"more than {cap} spans in one submission")
                continue
            try:
                candidates.append((index, self._check_one(raw, claims), raw))
            except _Reject as exc:
                reject(raw, exc.code, exc.reason)
        if claims:
            candidates = self._limit_per_line(candidates, reject)
        kept = self._settle(candidates, reject, claims)
        report.accepted = sorted(kept, key=lambda s: s.start)
        return report

    # -- one span ----------------------------------------------------------------------

    def _check_one(self, raw: Any, claims: bool = True) -> Span:
        if not isinstance(raw, Mapping):
            raise _Reject(S.MALFORMED, "a span must be an object {start, end, label, ...}")
        start, end = as_int(raw.get("start")), as_int(raw.get("end"))
        if start is None or end is None:
            raise _Reject(S.MALFORMED, "start and end must be integers (end exclusive)")
        n = self.num_tokens
        if not 0 <= start < end <= n:
            raise _Reject(
                S.OUT_OF_RANGE, f"need 0 <= start < end <= {n}, got start={start}, end={end}"
            )
        label = raw.get("label")
        if not isinstance(label, str) or label not in self.label_scores:
            # A few names, not all: each rejection repeats this (bounded response size).
            names = sorted(self.label_scores)
            known = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
            raise _Reject(S.UNKNOWN_LABEL, f"unknown label {_cut(label)}; known: {known}")
        confidence = raw.get("confidence")
        if (
            isinstance(confidence, bool)
            or not isinstance(confidence, int | float)
            or not math.isfinite(confidence)
            or not 0.0 <= confidence <= 1.0
        ):
            raise _Reject(S.BAD_CONFIDENCE, f"confidence must be in [0, 1], got {_cut(confidence)}")
        evidence, evidence_end = raw.get("evidence"), raw.get("evidence_end")
        if not isinstance(evidence, str):
            raise _Reject(S.MALFORMED, "evidence must be a quote (string) from the span")
        if evidence_end is not None and not isinstance(evidence_end, str):
            raise _Reject(S.MALFORMED, "evidence_end must be a quote (string) or absent")
        span = Span(start, end, label, float(confidence), evidence, evidence_end)
        if raw.get("contrast") is not None:
            span = replace(span, contrast=self._check_contrast(raw["contrast"]))
        if not claims:
            return span
        self._check_size(start, end, label)
        if self.index is not None:
            self._check_evidence(span, self.index)
            self._check_grounding(span, self.index)
        return span

    def _check_contrast(self, raw: Any) -> tuple[int, int, int]:
        if self.contrast is None:
            raise _Reject(
                S.CONTRAST_NOT_ANCHORED,
                "a contrast cites a sibling rollout: only a group's judge may give one",
            )
        checked = self.contrast(raw)
        if isinstance(checked, str):
            raise _Reject(S.CONTRAST_NOT_ANCHORED, checked)
        return checked.rollout, checked.start, checked.end

    def _check_size(self, start: int, end: int, label: str) -> None:
        length = end - start
        if label in S.REGION_LABELS:
            share = self.limits.max_region_share
            if length > self.limits.region_budget(self.num_tokens):
                raise _Reject(
                    S.SPAN_TOO_LONG,
                    f"{label} covers {length} of {self.num_tokens} tokens; a region label "
                    f"may cover at most {share:g} of the trace",
                )
        elif length > self.limits.max_point_tokens or (
            length > self.limits.point_cap(self.num_tokens) and not self._one_line(start, end)
        ):
            raise _Reject(
                S.SPAN_TOO_LONG,
                f"{label} covers {length} of {self.num_tokens} tokens; mark the step itself: "
                f"at most {self.limits.max_point_tokens} tokens, and at most half the trace "
                "unless the step is one line",
            )

    def _one_line(self, start: int, end: int) -> bool:
        """Whether tokens ``[start, end)`` lie within one line of the trace (its own line
        break aside): a long step of a short trace, such as a correction paragraph, may
        cover more than half of it. Without a trace nobody can tell: a caller's own spans
        (/v1/credit) keep only the token cap."""
        if self.trace is None:
            return True
        low, high = self.trace.char_range(start, end)
        return "\n" not in self.trace.text[low:high].rstrip()

    def _check_evidence(self, span: Span, ix: TraceIndex) -> None:
        folded = ix.folded
        low, high = int(folded.token_starts[span.start]), int(folded.token_starts[span.end])
        inside = len(folded.text[low:high].strip(" "))
        first_line, last_line = ix.line_of(span.start), ix.line_of(span.end - 1)
        quote = self._quote(span.evidence, inside, "evidence")
        at = folded.text.find(quote, low, high)
        if at < 0:
            raise _Reject(
                S.EVIDENCE_NOT_FOUND,
                f"evidence not found inside tokens [{span.start}, {span.end}); {ix.where(quote)}",
            )
        # Tokens are looked up only for a rejection's message: the anchoring tests compare
        # chars (`TraceIndex.before_line`; four token searches a span were 15% of checking
        # 256 spans of a 32k-token trace).
        if not ix.before_line(at, first_line + 2):
            a, b = folded.tokens_of(at, len(quote))
            raise _Reject(
                S.EVIDENCE_NOT_ANCHORED,
                f"the quote occurs at tokens [{a}, {b}), more than one line after the span's "
                f"start {span.start}; start the span at most one line before its evidence",
            )
        quote_end = quote
        if span.evidence_end is not None:
            quote_end = self._quote(span.evidence_end, inside, "evidence_end")
        if quote_end == quote:
            # One quote anchors one place: the occurrence that can anchor the start and lies
            # nearest the end (a line that repeats its text must not anchor every sub-line).
            window = int(folded.token_starts[ix.line_end(first_line + 1)])
            at = folded.text.rfind(quote, low, min(high, window + len(quote) - 1))
        else:
            at = folded.text.rfind(quote_end, low, high)
        if at < 0:
            raise _Reject(
                S.EVIDENCE_NOT_FOUND,
                f"evidence_end not found inside tokens [{span.start}, {span.end}); "
                f"{ix.where(quote_end)}",
            )
        if ix.before_line(at + len(quote_end) - 1, last_line - 1):
            a, b = folded.tokens_of(at, len(quote_end))
            raise _Reject(
                S.EVIDENCE_NOT_ANCHORED,
                f"the span ends at token {span.end}, more than one line after its last quote "
                f"(tokens [{a}, {b})); end the span within a line of the quote, or quote its "
                "last line as evidence_end",
            )

    def _quote(self, text: str, inside: int, name: str) -> str:
        quote = fold(text[: 8 * (self.limits.max_point_tokens + 64)])
        if not quote or len(quote) < min(MIN_EVIDENCE_CHARS, inside):
            raise _Reject(
                S.EVIDENCE_TOO_SHORT,
                f"{name} too short: quote at least {MIN_EVIDENCE_CHARS} characters of the span "
                "(or the whole span if it is shorter)",
            )
        return quote

    def _check_grounding(self, span: Span, ix: TraceIndex) -> None:
        score = self.label_scores.get(span.label, 0.0)
        if span.label in (L.INVALID, L.UNSUPPORTED):
            # Slander: a line of claims the checker proves, with words that claim nothing
            # (grounding._READ_WHOLE), cannot be an error nor depend on one.
            if ix.checks.proven_true(span.start, span.end):
                proven = "; ".join(ix.checks.proven_claims(span.start, span.end)[:3])
                raise _Reject(
                    S.CONTRADICTS_ARITHMETIC,
                    f"the claim checks out: {proven} holds on the lines of tokens "
                    f"[{span.start}, {span.end}), and the lines say nothing else; "
                    "mark the line where the error is",
                )
            if span.label == L.INVALID:
                return
        if score <= 0:
            return
        checks = ix.checks
        if not (checks.has_false or checks.has_taint or ix.wrong_answer):
            return  # a trace the checker finds nothing wrong in: nothing to look up
        false = checks.false_on(span.start, span.end)
        if false is not None:
            raise _Reject(
                S.CONTRADICTS_ARITHMETIC,
                f"a {span.label} span may not touch a line with a false computation: "
                f"{_cut(false)} does not hold; mark it invalid, and credit lines without it",
            )
        if checks.tainted_on(span.start, span.end):
            raise _Reject(
                S.BUILT_ON_ERROR,
                f"a {span.label} span may not touch a line that computes with the value of an "
                "earlier false computation; mark it unsupported",
            )
        if ix.on_wrong_answer(span.start, span.end):
            raise _Reject(
                S.WRONG_FINAL_ANSWER,
                f"a {span.label} span may not touch the final answer: the verdict says it is wrong",
            )

    # -- across spans ------------------------------------------------------------------

    def _limit_per_line(
        self, candidates: list[tuple[int, Span, Any]], reject: Any
    ) -> list[tuple[int, Span, Any]]:
        if not candidates or self.index is None:  # nothing to count: no index to build
            return candidates
        per_line: dict[int, int] = {}
        kept: list[tuple[int, Span, Any]] = []
        for item in sorted(candidates, key=precedence):
            line = self.index.line_of(item[1].start)
            if per_line.get(line, 0) >= self.limits.max_per_line:
                reject(
                    item[2],
                    S.FLOOD,
                    f"more than {self.limits.max_per_line} spans start on the line of token "
                    f"{item[1].start}; the most confident are kept",
                )
                continue
            per_line[line] = per_line.get(line, 0) + 1
            kept.append(item)
        return kept

    def _settle(
        self, candidates: list[tuple[int, Span, Any]], reject: Any, claims: bool = True
    ) -> list[Span]:
        """Overlaps, then structure, until no span depends on an error that lost its place
        (claims only: spans that claim nothing settle their overlaps and stop there)."""
        pending = sorted(candidates, key=precedence)
        budget = self.limits.region_budget(self.num_tokens)
        floor = self.limits.unlock_confidence
        while True:
            kept, lost = resolve_overlaps(pending)
            if not claims:
                break
            over: list[tuple[int, Span, Any]] = []
            used = 0
            for item in kept:  # in precedence order: the most confident region first
                if item[1].label in S.REGION_LABELS:
                    used += item[1].end - item[1].start
                    if used > budget:
                        over.append(item)
            for item in over:
                reject(
                    item[2],
                    S.SPAN_TOO_LONG,
                    f"region labels together may cover at most "
                    f"{self.limits.max_region_share:g} of the trace ({budget} tokens); more "
                    "confident ones use the budget",
                )
            stands = unlocked([s for _, s, _ in kept], floor)
            orphans = [item for item, ok in zip(kept, stands, strict=True) if not ok]
            # An orphan that won an overlap may have displaced the very invalid another
            # orphan needs: such winners fall first, then the rest (all at once, so that a
            # hostile submission settles in a few rounds).
            winners = {id(rival) for _, rival in lost}
            orphans = [item for item in orphans if id(item[1]) in winners] or orphans
            for item in orphans:
                reject(
                    item[2],
                    S.NO_PRIOR_INVALID,
                    f"{item[1].label} needs an accepted invalid span (confidence >= {floor:g}) "
                    f"before token {item[1].start}, and each invalid unlocks one "
                    "verified_correction: a correction of nothing, or a dependence on no error",
                )
            if not over and not orphans:
                break
            dropped = {id(item) for item in (*over, *orphans)}
            pending = [item for item in pending if id(item) not in dropped]
        for item, rival in lost:
            reject(
                item[2],
                S.OVERLAP,
                f"overlaps the span [{rival.start}, {rival.end}) ({rival.label}, confidence "
                f"{rival.confidence:g}), which wins",
            )
        return [span for _, span, _ in kept]


def validate_spans(
    raw_spans: Sequence[Any],
    trace: Trace | None,
    label_scores: Mapping[str, float],
    *,
    num_tokens: int | None = None,
    limits: SpanLimits | None = None,
    verdict: Verdict | None = None,
) -> ValidationReport:
    """Check spans against `trace` (or, without one, against `num_tokens` only)."""
    validator = Validator(trace, label_scores, limits, num_tokens=num_tokens, verdict=verdict)
    return validator.check(raw_spans)


def _cut(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _shown(raw: Any) -> Mapping[str, Any]:
    """A rejected span as echoed back: its fields, long strings cut (the input is untrusted)."""
    if not isinstance(raw, Mapping):
        return {"value": _cut(raw)}
    out: dict[str, Any] = {}
    for key, value in list(raw.items())[:8]:
        if isinstance(value, str) and len(value) > _SHOWN_CHARS:
            value = value[:_SHOWN_CHARS] + "…"
        elif not isinstance(value, str | int | float | bool | None):
            value = _cut(value)
        out[str(key)[:64]] = value
    return out


class Rounds:
    """The validation rounds of one judging session, as the judge's `SpanCheck`.

    Each submission the judge has checked is a round (the first, then the repair);
    `final` checks the spans the judge ended with under the last round's number and
    keeps the earlier rounds' rejections beside its own: how often a judge makes
    things up is what an operator watches, even when the repair fixed it.
    """

    def __init__(self, validator: Validator) -> None:
        self.validator = validator
        self.reports: list[ValidationReport] = []

    def __call__(self, raw_spans: Sequence[Any]) -> ValidationReport:
        report = self.validator.check(raw_spans, round=len(self.reports) + 1)
        self.reports.append(report)
        return report

    def fresh(self) -> Rounds:
        """No rounds yet, same trace (for a fallback judge)."""
        return Rounds(self.validator)

    def final(
        self, raw_spans: Sequence[Any], *, claims: bool = True
    ) -> tuple[list[Span], list[Rejection]]:
        """`claims`: the `Judge.carries_claims` of the judge that produced `raw_spans`."""
        with collector_paused():  # a long trace's index and line checks: see collector.py
            report = self.validator.check(raw_spans, round=max(1, len(self.reports)), claims=claims)
        earlier = [r for past in self.reports[:-1] for r in past.rejected]
        return report.accepted, earlier + report.rejected
