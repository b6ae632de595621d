"""The rules judge's final span list, shaped so that validation accepts every span.

The rules judge is the fallback every LLM judge drops to, so a span of its own
that validation rejects (docs/design.md "Span validation") would be credit lost on the
one path that must not fail. Its candidate spans are cut to this shape here,
by dropping (never stretching) what a rule forbids:

* size: a point label covers at most ``max_point_tokens`` and half the trace; region
  labels together at most ``max_region_share`` of it (the most confident kept);
* grounding: a span with a positive score touches no `blocked` line (a false link, a
  value built on one, a wrong final answer: `grounding.LineChecks`);
* flood: at most ``max_per_line`` spans start on one marker line; same-label
  neighbours there are first joined into one span, then the least important go;
* at most ``max_spans`` spans, the most important kept;
* structure: ``verified_correction`` and ``unsupported`` only after a kept ``invalid``,
  one correction per invalid (`spans.unlocked`, as validation counts them);
* evidence: ``evidence`` quotes the span's start; ``evidence_end`` its end when the
  span covers more than two lines.

Lines are those of validation: marker lines (line starts, and every 64 tokens
within a long line). Quotes are sliced from the view's escaped text, so a trace
that imitates markers or fences is still quoted the way validation folds it.

A trace can hold thousands of candidates, so the steps work on them as numpy
columns (`_Rows`), each a few whole-array operations; Python loops only over the
few spans a cheap test cannot settle (a possible false link, a possible join).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from judge_service.folding import fold
from judge_service.judges.rules.token_spans import SpanColumns, TokenSpan
from judge_service.spans import NEEDS_PRIOR_INVALID, REGION_LABELS, SpanLimits, unlocked_columns
from judge_service.trace.decode import Trace
from judge_service.trace.markers import escape_view_text, marker_array

__all__ = ["SpanColumns", "TokenSpan", "shape_spans"]

INVALID = "invalid"
HEAD_CHARS = 160
TAIL_CHARS = 80
MIN_QUOTE_CHARS = 8
# Two same-label spans on a crowded line are joined only across a short gap
# (", ", ", and "): a longer one may hold a claim nobody checked.
MAX_JOIN_GAP_CHARS = 16

IntArray = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]
Index = IntArray | Mask


@dataclass(frozen=True)
class _Labels:
    """What the rules need of each distinct label, indexed by label code."""

    names: list[str]
    priority: IntArray  # lower is more important; unranked labels after all ranked ones
    cap: IntArray  # the most tokens a span of the label may cover
    positive: Mask
    needs_invalid: Mask
    invalid: Mask
    region: Mask
    correction: Mask

    @classmethod
    def build(
        cls,
        labels: Sequence[str],
        priority: Mapping[str, int],
        positive: frozenset[str],
        caps: tuple[int, int],  # (region, point)
    ) -> _Labels:
        names = list(dict.fromkeys(labels))  # distinct, in first-seen order
        return cls(
            names,
            np.array([priority.get(name, len(priority)) for name in names], np.int64),
            np.array([caps[0] if n in REGION_LABELS else caps[1] for n in names], np.int64),
            np.array([name in positive for name in names], np.bool_),
            np.array([name in NEEDS_PRIOR_INVALID for name in names], np.bool_),
            np.array([name == INVALID for name in names], np.bool_),
            np.array([name in REGION_LABELS for name in names], np.bool_),
            np.array([name == "verified_correction" for name in names], np.bool_),
        )


@dataclass(frozen=True)
class _Rows:
    """Candidate spans as columns, by start. `at` indexes the source spans, whose start,
    end, label and confidence objects the output keeps as they were given."""

    at: IntArray
    start: IntArray
    end: IntArray
    label: IntArray  # a `_Labels` code
    neg_confidence: npt.NDArray[np.float64]  # negated: rank sorts ascend
    line: IntArray  # the marker line of the start

    def __len__(self) -> int:
        return int(self.at.shape[0])

    def take(self, keep: Index) -> _Rows:
        """The rows `keep` selects (a mask, or ascending indices to stay by start)."""
        if keep.dtype == np.bool_ and keep.all():
            return self  # every row (the columns are never written in place): no copies
        return _Rows(
            self.at[keep],
            self.start[keep],
            self.end[keep],
            self.label[keep],
            self.neg_confidence[keep],
            self.line[keep],
        )


class _Shaper:
    """One call's trace, label table and blocked lines, for the steps of `shape_spans`."""

    def __init__(self, trace: Trace, labels: _Labels, blocked: Mask, unlock_confidence: float):
        self.trace = trace
        self.labels = labels
        self.unlock_confidence = unlock_confidence
        self.markers = marker_array(trace)
        self.blocked = np.concatenate(([0], blocked.cumsum(dtype=np.int64)))

    def line_of(self, tokens: IntArray) -> IntArray:
        # The array's own methods here and below: numpy's functions add a dispatch a call,
        # which on a short trace's few spans costs as much as the work.
        return self.markers.searchsorted(tokens, side="right") - 1

    def rows(self, columns: SpanColumns) -> _Rows:
        """`columns`, whose label codes index `self.labels`."""
        return _Rows(
            np.arange(len(columns), dtype=np.int64),
            columns.start,
            columns.end,
            columns.label,
            -columns.confidence,
            self.line_of(columns.start),
        )

    def fit(self, rows: _Rows) -> Mask:
        """Which spans are nonempty, within their label's size cap, and (with a positive
        label) touch no blocked line."""
        length = rows.end - rows.start
        fits = (length > 0) & (length <= self.labels.cap[rows.label])
        positive = fits & self.labels.positive[rows.label]
        end_line = self.line_of(np.maximum(rows.end - 1, rows.start))
        touched = self.blocked[end_line + 1] > self.blocked[rows.line]
        return fits & ~(positive & touched)

    def touches_blocked(self, start: int, end: int) -> bool:
        first, last = self.line_of(np.array([start, end - 1], np.int64)).tolist()
        return bool(self.blocked[last + 1] > self.blocked[first])

    def after_invalid(self, rows: _Rows) -> _Rows:
        """Drops a correction or dependence that no kept, scoring `invalid` unlocks, as
        validation counts them (`spans.unlocked`)."""
        needs = self.labels.needs_invalid[rows.label]
        if not needs.any():
            return rows
        # Only invalids and corrections need matching (a handful); the thousands of
        # dependences a long trace may hold need one scoring invalid before them, a
        # whole-array test against the first invalid's end.
        confidence = -rows.neg_confidence
        invalid = self.labels.invalid[rows.label] & (confidence >= self.unlock_confidence)
        first_end = int(rows.end[invalid].min()) if invalid.any() else None
        keep = ~needs
        if first_end is not None:
            keep |= needs & (rows.start >= first_end)
        correction = self.labels.correction[rows.label]
        matched = np.flatnonzero(invalid | correction)
        if correction.any():
            names = self.labels.names
            stands = unlocked_columns(
                rows.start[matched].tolist(),
                rows.end[matched].tolist(),
                [names[code] for code in rows.label[matched].tolist()],
                confidence[matched].tolist(),
                self.unlock_confidence,
            )
            keep[matched] = np.array(stands, np.bool_) | ~correction[matched] & keep[matched]
        return rows.take(keep)

    def region_budget(self, rows: _Rows, budget: int) -> _Rows:
        """Drops the region spans past one shared budget, the least confident first."""
        region = np.flatnonzero(self.labels.region[rows.label])
        if not region.shape[0]:
            return rows
        order = region[np.lexsort((rows.start[region], rows.neg_confidence[region]))]
        used = np.cumsum(rows.end[order] - rows.start[order])
        keep = np.ones(len(rows), np.bool_)
        keep[order[used > budget]] = False
        return rows.take(keep)

    def join_crowded(self, rows: _Rows, per_line: int) -> tuple[_Rows, dict[int, list[int]]]:
        """On a line where too many spans start, joins runs of same-label neighbours, so that
        "17 × 20 = 340, 17 × 4 = 68, and 340 + 68 = 408" keeps credit on every claim.
        Returns the rows left, a run's first row stretched over it at its least
        confidence, and the `at` of the spans joined to each run's first, by its `at`
        (the joined spans are made only for the runs kept: `_joined`)."""
        heads = self.joins(rows, per_line)
        if not heads:
            return rows, {}
        joining = np.fromiter(heads, np.int64, len(heads))  # by row, ascending
        into = np.fromiter(heads.values(), np.int64, len(heads))
        # A run's rows are disjoint and by start: its end is its last row's, the greatest.
        end, neg_confidence = rows.end.copy(), rows.neg_confidence.copy()
        np.maximum.at(end, into, rows.end[joining])
        np.maximum.at(neg_confidence, into, rows.neg_confidence[joining])
        runs: dict[int, list[int]] = {}  # first span -> the spans joined to it, in order
        for at, head_at in zip(rows.at[joining].tolist(), rows.at[into].tolist(), strict=True):
            runs.setdefault(head_at, []).append(at)
        keep = np.ones(len(rows), np.bool_)
        keep[joining] = False
        moved = _Rows(rows.at, rows.start, end, rows.label, neg_confidence, rows.line)
        return moved.take(keep), runs

    def joins(self, rows: _Rows, per_line: int) -> dict[int, int]:
        """Each row that joins the span before it: row -> the first row of its run."""
        if not _crowded(rows.line, per_line):  # most traces: no line to join spans on
            return {}
        line, label = rows.line, rows.label
        crowded = _run_lengths(line) > per_line
        # A row may join its neighbour only on the same crowded line, with the same label.
        rows_in = 1 + np.flatnonzero(
            crowded[1:] & (line[1:] == line[:-1]) & (label[1:] == label[:-1])
        )
        if not rows_in.shape[0]:
            return {}
        offsets = self.trace.offsets
        candidates = zip(
            rows_in.tolist(),
            offsets[rows.end[rows_in - 1]].tolist(),  # the gap to the span before
            offsets[rows.start[rows_in]].tolist(),
            rows.end[rows_in].tolist(),
            self.labels.cap[label[rows_in]].tolist(),
            self.labels.positive[label[rows_in]].tolist(),
            strict=True,
        )
        starts = rows.start.tolist()
        heads: dict[int, int] = {}
        for row, low, high, end, cap, positive in candidates:
            # A gap of at most 16 chars is short stripped or not: slice only a longer one.
            if high - low > MAX_JOIN_GAP_CHARS and _long_gap(self.trace.text[low:high]):
                continue
            head = heads.get(row - 1, row - 1)
            start = starts[head]  # the joined span's: that of its run's first row
            if end - start > cap or (positive and self.touches_blocked(start, end)):
                continue
            heads[row] = head
        return heads

    def quoted(self, rows: _Rows, spans: list[TokenSpan]) -> list[dict[str, object]]:
        if not spans:
            return []
        escaped = escape_view_text(self.trace.text)
        offsets = self.trace.offsets
        lows, highs = offsets[rows.start].tolist(), offsets[rows.end].tolist()
        long = (self.line_of(rows.end - 1) - rows.line >= 2).tolist()
        return [
            _quoted(span, escaped[low:high].strip(), spread)
            for span, low, high, spread in zip(spans, lows, highs, long, strict=True)
        ]


def shape_spans(
    spans: Sequence[TokenSpan] | SpanColumns,
    trace: Trace,
    *,
    priority: Mapping[str, int],
    positive: frozenset[str],
    blocked: Mask,
    limits: SpanLimits,
) -> list[dict[str, object]]:
    """`spans` (disjoint) reduced to a list validation accepts whole, with evidence quotes.
    A span kept keeps the start, end, label and confidence objects it was given (from
    `SpanColumns`: Python numbers made of the columns).

    `priority` ranks labels (lower is more important); `positive` are the labels with a
    positive score; `blocked` marks the marker lines no positive span may touch."""
    if not spans:  # nothing to shape: no line index, no escaped text
        return []
    columns = spans if isinstance(spans, SpanColumns) else SpanColumns.of(spans)
    if not (columns.start[1:] > columns.start[:-1]).all():
        spans = sorted(spans)  # by start (the tuples, as sorting before the cuts always did)
        columns = SpanColumns.of(spans)
    budget = limits.region_budget(trace.num_tokens)
    caps = (budget, limits.point_cap(trace.num_tokens))
    labels = _Labels.build(columns.names, priority, positive, caps)
    shaper = _Shaper(trace, labels, blocked, limits.unlock_confidence)
    rows = shaper.rows(columns)
    rows = rows.take(shaper.fit(rows))
    rows = shaper.after_invalid(rows)
    rows, runs = shaper.join_crowded(rows, limits.max_per_line)
    rows = _keep_best(rows, labels, limits.max_per_line, by_line=True)
    rows = _keep_best(rows, labels, limits.max_spans, by_line=False)
    rows = shaper.region_budget(rows, budget)
    rows = shaper.after_invalid(rows)
    kept = [
        _joined(spans[at], [spans[m] for m in runs[at]]) if at in runs else spans[at]
        for at in rows.at.tolist()
    ]
    return shaper.quoted(rows, kept)


def _joined(first: TokenSpan, rest: list[TokenSpan]) -> TokenSpan:
    """`first` stretched over the spans `rest`, at the least confidence. min() keeps the
    first of equal values, as joining one span at a time with min(joined, next) did."""
    confidence = min([first.confidence, *[span.confidence for span in rest]])
    return TokenSpan(first.start, rest[-1].end, first.label, confidence)


def _long_gap(text: str) -> bool:
    return len(text.strip()) > MAX_JOIN_GAP_CHARS


def _keep_best(rows: _Rows, labels: _Labels, limit: int, *, by_line: bool) -> _Rows:
    """The rows `_best` keeps, at most `limit` per marker line (`by_line`) or in all."""
    over = _crowded(rows.line, limit) if by_line else len(rows) > max(limit, 0)
    if not over:
        return rows  # every row is kept (most traces)
    rank = (rows.start, rows.neg_confidence, labels.priority[rows.label])
    return rows.take(_best(rank, limit, rows.line if by_line else None))


def _best(
    rank: tuple[IntArray, npt.NDArray[np.float64], IntArray], limit: int, groups: IntArray | None
) -> IntArray:
    """The indices of at most `limit` spans per group (all one group without `groups`),
    the best ranked, ascending. `rank` is the sort keys, the last most significant (as
    for `np.lexsort`): a span's (priority, -confidence, start)."""
    n = rank[0].shape[0]
    limit = max(limit, 0)
    if groups is None:
        if n <= limit:
            return np.arange(n, dtype=np.int64)
        return np.sort(np.lexsort(rank)[:limit])
    # By group, then rank; lexsort is stable, as the sort by rank it replaces was.
    order = np.lexsort((*rank, groups))
    return np.sort(order[_run_positions(groups[order]) < limit])


def _crowded(line: IntArray, limit: int) -> bool:
    """Whether more than `limit` rows share a value of `line`, which ascends (the rows are
    by start): then some row's value recurs `limit` rows later. Two whole-array steps
    where `_run_lengths` takes six; a short trace's lines are rarely crowded."""
    n = line.shape[0]
    if n <= max(limit, 0):
        return False
    return limit <= 0 or bool((line[limit:] == line[:-limit]).any())


def _run_positions(values: IntArray) -> IntArray:
    """Each element's position within its run of equal neighbours."""
    n = values.shape[0]
    index = np.arange(n, dtype=np.int64)
    first = np.ones(n, np.bool_)
    first[1:] = values[1:] != values[:-1]
    return index - np.maximum.accumulate(np.where(first, index, 0))


def _run_lengths(values: IntArray) -> IntArray:
    """For each element, the length of its run of equal neighbours."""
    n = values.shape[0]
    edges = np.flatnonzero(values[1:] != values[:-1]) + 1
    lengths = np.diff(np.concatenate(([0], edges, [n])))
    return np.repeat(lengths, lengths)


def _quoted(span: TokenSpan, text: str, spread: bool) -> dict[str, object]:
    """The output span, quoting `text` (its stripped escaped text); `spread`: the span
    ends two or more marker lines after it starts."""
    out: dict[str, object] = {
        "start": span.start,
        "end": span.end,
        "label": span.label,
        "confidence": span.confidence,
        "evidence": _quote(text, HEAD_CHARS, head=True),
    }
    if spread:
        out["evidence_end"] = _quote(text, TAIL_CHARS, head=False)
    return out


def _quote(text: str, chars: int, *, head: bool) -> str:
    """The first (or last) `chars` of `text`, longer if folding leaves under 8 characters
    (or under what the whole text folds to)."""
    whole: int | None = None  # len(fold(text)): folded only for a quote that folds short
    while True:
        quote = (text[:chars] if head else text[-chars:]).strip()
        if chars >= len(text):
            return quote
        folded = len(fold(quote))
        if folded >= MIN_QUOTE_CHARS:
            return quote
        if whole is None:
            whole = len(fold(text))
        if folded >= whole:
            return quote
        chars *= 2
