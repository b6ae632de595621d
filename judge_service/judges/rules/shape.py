"""The rules judge's final span list, shaped so that validation accepts every span.

The rules judge is the fallback every LLM judge drops to, so a span of its own
that validation rejects (DESIGN "Span validation") would be credit lost on the
one path that must not fail. Its candidate spans are cut to this shape here,
by dropping (never stretching) what a rule forbids:

* size: a point label covers at most ``max_point_tokens``; a region label at most
  ``max_region_share`` of the trace;
* grounding: a span with a positive score contains no false arithmetic link;
* flood: at most ``max_per_line`` spans start on one marker line; same-label
  neighbours there are first joined into one span, then the least important go;
* at most ``max_spans`` spans, the most important kept;
* structure: ``verified_correction`` and ``unsupported`` only after a kept ``invalid``;
* evidence: ``evidence`` quotes the span's start; ``evidence_end`` its end when the
  span covers more than two lines.

Lines are those of validation: marker lines (line starts, and every 64 tokens
within a long line). Quotes are sliced from the view's escaped text, so a trace
that imitates markers or fences is still quoted the way validation folds it.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from judge_service.folding import fold
from judge_service.spans import NEEDS_PRIOR_INVALID, REGION_LABELS, SpanLimits
from judge_service.trace.decode import Trace
from judge_service.trace.markers import escape_view_text, marker_array

__all__ = ["TokenSpan", "shape_spans"]

INVALID = "invalid"
HEAD_CHARS = 160
TAIL_CHARS = 80
MIN_QUOTE_CHARS = 8
# Two same-label spans on a crowded line are joined only across a short gap
# (", ", ", and "): a longer one may hold a claim nobody checked.
MAX_JOIN_GAP_CHARS = 16


class TokenSpan(NamedTuple):
    start: int
    end: int
    label: str
    confidence: float


class _Lines:
    def __init__(self, trace: Trace) -> None:
        self.starts = marker_array(trace).tolist()  # bisect on a list: no numpy scalars

    def of(self, token: int) -> int:
        return bisect.bisect_right(self.starts, token) - 1

    def of_starts(self, spans: Sequence[TokenSpan]) -> list[int]:
        """The line of each span's start."""
        return [bisect.bisect_right(self.starts, s.start) - 1 for s in spans]


def shape_spans(
    spans: Sequence[TokenSpan],
    trace: Trace,
    *,
    priority: Mapping[str, int],
    positive: frozenset[str],
    false_links: Sequence[tuple[int, int]],
    limits: SpanLimits,
) -> list[dict[str, object]]:
    """`spans` (disjoint) reduced to a list validation accepts whole, with evidence quotes.

    `priority` ranks labels (lower is more important); `positive` are the labels with a
    positive score; `false_links` are the char ranges of the false arithmetic links."""
    if not spans:  # nothing to shape: no line index, no escaped text
        return []
    lines = _Lines(trace)
    links = sorted(false_links)
    region_cap = max(1, math.floor(limits.max_region_share * trace.num_tokens))

    def fits(span: TokenSpan) -> bool:
        length = span.end - span.start
        cap = region_cap if span.label in REGION_LABELS else limits.max_point_tokens
        if length > cap:
            return False
        return span.label not in positive or not _holds_false_link(span, trace, links)

    def rank(span: TokenSpan) -> tuple[int, float, int]:
        return (priority.get(span.label, len(priority)), -span.confidence, span.start)

    # By start; disjoint and nonempty, no two spans start together (tuples compare starts).
    kept = sorted(s for s in spans if s.end > s.start and fits(s))
    kept = _after_invalid(kept)
    kept, kept_lines = _join_crowded(kept, trace, lines, fits, limits.max_per_line)
    kept = _best(kept, rank, limits.max_per_line, kept_lines)
    kept = _best(kept, rank, limits.max_spans, [0] * len(kept))
    kept = _after_invalid(kept)
    escaped = escape_view_text(trace.text)
    return [_quoted(span, trace, escaped, lines) for span in kept]


def _holds_false_link(span: TokenSpan, trace: Trace, links: list[tuple[int, int]]) -> bool:
    low, high = trace.char_range(span.start, span.end)
    at = bisect.bisect_left(links, (low, -1))
    while at < len(links) and links[at][0] < high:
        if links[at][1] <= high:
            return True
        at += 1
    return False


def _after_invalid(spans: list[TokenSpan]) -> list[TokenSpan]:
    """Drops a correction or dependence that has no `invalid` before it (spans by start)."""
    out: list[TokenSpan] = []
    seen_invalid = False
    for span in spans:
        if span.label in NEEDS_PRIOR_INVALID and not seen_invalid:
            continue
        seen_invalid |= span.label == INVALID
        out.append(span)
    return out


def _join_crowded(
    spans: list[TokenSpan],
    trace: Trace,
    lines: _Lines,
    fits: Callable[[TokenSpan], bool],
    per_line: int,
) -> tuple[list[TokenSpan], list[int]]:
    """On a line where too many spans start, joins runs of same-label neighbours, so that
    "17 × 20 = 340, 17 × 4 = 68, and 340 + 68 = 408" keeps credit on every claim. Returns
    the spans and the line each starts on."""
    line_of = lines.of_starts(spans)
    counts: dict[int, int] = {}
    for line in line_of:
        counts[line] = counts.get(line, 0) + 1
    out: list[TokenSpan] = []
    out_lines: list[int] = []
    for span, line in zip(spans, line_of, strict=True):
        if out and counts[line] > per_line and out_lines[-1] == line:
            last = out[-1]
            low, high = trace.char_range(last.end, span.start)
            joined = last._replace(end=span.end, confidence=min(last.confidence, span.confidence))
            gap = trace.text[low:high].strip()
            if last.label == span.label and len(gap) <= MAX_JOIN_GAP_CHARS and fits(joined):
                out[-1] = joined
                continue
        out.append(span)
        out_lines.append(line)
    return out, out_lines


def _best(
    spans: list[TokenSpan],
    rank: Callable[[TokenSpan], tuple[int, float, int]],
    limit: int,
    groups: list[int],
) -> list[TokenSpan]:
    """At most `limit` spans per group (`groups[i]` is span i's), the best ranked; the
    survivors in trace order (`spans` are disjoint, by start)."""
    taken: dict[int, int] = {}
    keep: list[int] = []
    ranks = list(map(rank, spans))  # once each, not through a lambda per comparison key
    for i in sorted(range(len(spans)), key=ranks.__getitem__):
        key = groups[i]
        if taken.get(key, 0) < limit:
            taken[key] = taken.get(key, 0) + 1
            keep.append(i)
    keep.sort()
    return [spans[i] for i in keep]


def _quoted(span: TokenSpan, trace: Trace, escaped: str, lines: _Lines) -> dict[str, object]:
    low, high = trace.char_range(span.start, span.end)
    text = escaped[low:high].strip()
    out: dict[str, object] = {
        "start": span.start,
        "end": span.end,
        "label": span.label,
        "confidence": span.confidence,
        "evidence": _quote(text, HEAD_CHARS, head=True),
    }
    if lines.of(span.end - 1) - lines.of(span.start) >= 2:
        out["evidence_end"] = _quote(text, TAIL_CHARS, head=False)
    return out


def _quote(text: str, chars: int, *, head: bool) -> str:
    """The first (or last) `chars` of `text`, longer if folding leaves under 8 characters."""
    need = min(MIN_QUOTE_CHARS, len(fold(text)))
    while True:
        quote = (text[:chars] if head else text[-chars:]).strip()
        if chars >= len(text) or len(fold(quote)) >= need:
            return quote
        chars *= 2
