"""What span validation reads of one trace, built once per trace, and how overlaps settle.

`TraceIndex` holds the folded text (quotes are searched in it), the marker lines
(sizes, floods and budgets count them) and, on first use, the exact checker's
verdict on every line (`grounding.LineChecks`: only a span with a positive score,
or an ``invalid`` one, asks). `resolve_overlaps` keeps, in precedence order, each
span that does not overlap one already kept.
"""

from __future__ import annotations

import bisect
from typing import Any

from judge_service import spans as S
from judge_service.folding import FoldedText
from judge_service.grounding import LineChecks, Verdict, wrong_answer_tokens
from judge_service.spans import Span
from judge_service.trace.decode import Trace
from judge_service.trace.markers import marker_array

__all__ = ["TraceIndex", "precedence", "resolve_overlaps"]


class TraceIndex:
    """What evidence checks need of one trace, computed once: folded text, lines, and (on
    first use: only a positive or invalid span asks) the checker's verdict on each line."""

    def __init__(self, trace: Trace, verdict: Verdict | None) -> None:
        self.trace = trace
        self.folded = trace.derived(FoldedText, lambda: FoldedText.build(trace.text, trace.offsets))
        # A list: bisect on it costs a fifth of a numpy searchsorted call, and a submission
        # asks four times a span.
        self.line_starts = marker_array(trace).tolist()
        self.verdict = verdict
        self._checks: LineChecks | None = None
        self._answer_lines: tuple[int, int] | None = None

    @property
    def checks(self) -> LineChecks:
        if self._checks is None:
            self._checks = LineChecks.of(self.trace)
            answer = wrong_answer_tokens(self.trace, self.verdict)
            if answer is not None:
                self._answer_lines = self._checks.lines_of(*answer)
        return self._checks

    @property
    def wrong_answer(self) -> bool:
        _ = self.checks
        return self._answer_lines is not None

    def on_wrong_answer(self, start: int, end: int) -> bool:
        first, last = self.checks.lines_of(start, end)
        lines = self._answer_lines
        return lines is not None and first <= lines[1] and lines[0] <= last

    def line_of(self, token: int) -> int:
        return bisect.bisect_right(self.line_starts, token) - 1

    def before_line(self, position: int, line: int) -> bool:
        """Whether the token of folded char `position` lies before marker line `line`:
        ``line_of(folded.token_at(position)) < line``, without the token's search. That
        token comes before the one starting the line exactly when its char does: a token
        t precedes token m when fewer than m tokens end at or before t's char."""
        if line <= 0:
            return False  # every token is on line 0 or after
        if line >= len(self.line_starts):
            return True
        start = self.trace.offsets[self.line_starts[line]]
        return int(self.folded.origin[position]) < int(start)

    def line_end(self, line: int) -> int:
        """The token where marker line `line` ends (T for the last)."""
        starts = self.line_starts
        return starts[line + 1] if line + 1 < len(starts) else self.trace.num_tokens

    def where(self, quote: str) -> str:
        at = self.folded.text.find(quote)
        if at < 0:
            return "it does not occur anywhere in the trace"
        a, b = self.folded.tokens_of(at, len(quote))
        return f"the quote occurs at tokens [{a}, {b})"


def precedence(item: tuple[int, Span, Any]) -> tuple[bool, float, int, int]:
    index, span, _raw = item
    return (span.label in S.REGION_LABELS, -span.confidence, span.start, index)


def resolve_overlaps(
    ordered: list[tuple[int, Span, Any]],
) -> tuple[list[tuple[int, Span, Any]], list[tuple[tuple[int, Span, Any], Span]]]:
    """Greedy in precedence order over a sorted list of kept, disjoint intervals."""
    starts: list[int] = []
    spans: list[Span] = []
    kept: list[tuple[int, Span, Any]] = []
    lost: list[tuple[tuple[int, Span, Any], Span]] = []
    for item in ordered:
        span = item[1]
        at = bisect.bisect_left(starts, span.end)  # kept spans starting before span.end
        rival = spans[at - 1] if at else None
        if rival is not None and rival.end > span.start:
            lost.append((item, rival))
            continue
        starts.insert(at, span.start)
        spans.insert(at, span)
        kept.append(item)
    return kept, lost
