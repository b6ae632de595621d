"""The judged trace's text cut into pieces: a piece is a run of text that looks the same
all through, so every boundary that changes the look cuts: accepted and rejected spans,
evidence quotes, credit changes, and the ⟦n⟧ marker positions the judge saw (hovering
any piece then names its first token). Text is kept in the judge's view form
(`escape_chars`: one char for one, so offsets hold).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from judge_service.trace.decode import Trace
from judge_service.trace.markers import escape_chars, marker_positions, strip_markers
from judge_service.view.source import TraceSource

FloatArray = npt.NDArray[np.float64]


@dataclass(slots=True)  # not frozen: a report builds millions, and frozen init is slower
class Piece:
    """A run of the trace's text that looks the same all through."""

    text: str  # display form, `escape_chars` of the trace's chars [start, end)
    start: int
    end: int
    first_token: int  # tokens [first_token, last_token) own these chars
    last_token: int
    tone: str  # the accepted span's colour class; "" outside spans
    level: int  # 0..4: shade intensity, |credit| relative to the trace's largest
    span: int | None  # index into Page.spans
    evidence: bool  # inside a quote of the span's evidence
    rejected: tuple[int, ...]  # indices into Page.rejected covering it
    title: str  # the span's and rejections' details; "" for plain text (its position
    # shows on hover from first_token, without a title on every piece)


@dataclass(frozen=True)
class SpanRow:
    start: int
    end: int
    label: str
    tone: str
    score: float
    confidence: float
    evidence: str
    evidence_end: str | None
    chars: tuple[int, int] | None
    credit: float  # per token (of its first token; 0 where the response mask is 0)
    excerpt: str


@dataclass(frozen=True)
class RejectedRow:
    start: int | None  # None when the judge's span was not a valid token range
    end: int | None
    label: str
    code: str
    reason: str
    round: int
    chars: tuple[int, int] | None
    submitted: str  # the judge's span as JSON


def level_of(value: float, peak: float) -> int:
    if value == 0.0 or peak <= 0.0:
        return 0
    return max(1, min(4, math.ceil(4 * abs(value) / peak - 1e-9)))


def find_quote(text: str, quote: str) -> tuple[int, int] | None:
    """Where `quote` sits in `text`: verbatim, in the judge's view form, or with its
    whitespace folded (as validation compares); None when only a deeper fold matches."""
    quote = strip_markers(quote).strip()
    if not quote:
        return None
    for haystack in (text, escape_chars(text)):
        at = haystack.find(quote)
        if at >= 0:
            return at, at + len(quote)
    pattern = r"\s+".join(re.escape(word) for word in quote.split())
    match = re.search(pattern, text) or re.search(pattern, escape_chars(text))
    return (match.start(), match.end()) if match else None


def cut(
    source: TraceSource,
    spans: list[SpanRow],
    rejected: list[RejectedRow],
    credit: FloatArray,
    peak: float,
) -> list[Piece]:
    """Cut the text at every boundary, then give each piece its look (vectorised over
    pieces: a 32k-token trace has a thousand of them, a run report 10,000 traces)."""
    text, offsets = source.text, source.offsets
    n = source.num_tokens
    bounds = [0, len(text)]
    quotes: list[tuple[int, int]] = []
    for span_row in spans:
        if span_row.chars is None:
            continue
        a, b = span_row.chars
        bounds += span_row.chars
        for quote in (span_row.evidence, span_row.evidence_end):
            found = find_quote(text[a:b], quote) if quote else None
            if found:
                quotes.append((a + found[0], a + found[1]))
                bounds += quotes[-1]
    bounds += [c for rej in rejected if rej.chars for c in rej.chars]
    markers = marker_positions(Trace(np.zeros(n, np.int64), text, offsets)) if n else []
    cuts = np.unique(
        np.concatenate(
            (
                np.asarray(bounds, np.int64),
                offsets[np.asarray(markers, np.int64)],
                offsets[np.flatnonzero(np.diff(credit)) + 1],
            )
        )
    )
    starts, stops = cuts[:-1], cuts[1:]
    ends = offsets[1:]
    owners = np.searchsorted(ends, starts, side="right")  # the token holding the first char
    lasts = np.searchsorted(ends, stops - 1, side="right") + 1
    # Empty-range tokens right before a piece's first token carry the leading bytes of the
    # character it completes: the piece is theirs too.
    firsts = owners.copy()
    before = np.maximum(owners - 1, 0)
    leading = (owners > 0) & (offsets[before] == starts) & (offsets[owners] == starts)
    for k in np.flatnonzero(leading).tolist():
        while firsts[k] > 0 and offsets[firsts[k] - 1] == offsets[firsts[k]]:
            firsts[k] -= 1
    span_of = np.full(starts.shape[0], -1, np.int64)
    for index, span_row in enumerate(spans):
        if span_row.chars is None:
            continue
        span_of[(starts >= span_row.chars[0]) & (stops <= span_row.chars[1])] = index
    in_quote = np.zeros(starts.shape[0], bool)
    for qa, qb in quotes:
        in_quote |= (starts >= qa) & (stops <= qb)
    covered: list[list[int]] = [[] for _ in range(starts.shape[0])]
    for index, rej in enumerate(rejected):
        if rej.chars:
            inside = (starts >= rej.chars[0]) & (stops <= rej.chars[1])
            for at in np.flatnonzero(inside).tolist():
                covered[at].append(index)
    values = credit[np.minimum(owners, max(n - 1, 0))] if n else np.zeros(starts.shape[0])
    display = escape_chars(text)
    pieces: list[Piece] = []
    for k, (a, b, first, last, si) in enumerate(
        zip(
            starts.tolist(),
            stops.tolist(),
            firsts.tolist(),
            lasts.tolist(),
            span_of.tolist(),
            strict=True,
        )
    ):
        row = spans[si] if si >= 0 else None
        value = float(values[k])
        marked = bool(in_quote[k]) and row is not None
        rej_here = [rejected[i] for i in covered[k]]
        pieces.append(
            Piece(
                text=display[a:b],
                start=a,
                end=b,
                first_token=first,
                last_token=last,
                tone=row.tone if row else "",
                level=level_of(value, peak) if row else 0,
                span=si if row else None,
                evidence=marked,
                rejected=tuple(covered[k]),
                title=_title(first, last, row, value, marked, rej_here) if row or rej_here else "",
            )
        )
    return pieces


def _title(
    first: int,
    last: int,
    row: SpanRow | None,
    value: float,
    in_quote: bool,
    rejected: list[RejectedRow],
) -> str:
    where = (
        f"⟦{first}⟧ token {first}" if last - first == 1 else f"⟦{first}⟧ tokens [{first}, {last})"
    )
    lines = [where]
    if row is not None:
        lines.append(
            f"{row.label} [{row.start}, {row.end}) score {row.score:+g}, confidence "
            f"{row.confidence:g}, credit {value:+.4g} per token"
        )
        if in_quote:
            lines.append("quoted by the judge as evidence")
    for rej in rejected:
        lines.append(f"rejected {rej.label} [{rej.start}, {rej.end}) ({rej.code}): {rej.reason}")
    return "\n".join(lines)
