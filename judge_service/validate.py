"""Checking a judge's spans against the trace: bounds, label, confidence, evidence, overlaps.

A span is accepted only if ``0 <= start < end <= T``, its label is known, its
confidence is in [0, 1], and its evidence quote (at least 8 characters, or the
whole span text if that is shorter), once folded, occurs inside the folded text
of tokens ``[start, end)``. Folding is Unicode NFKC, the view's escapes, ⟦n⟧
markers removed and whitespace collapsed, so a judge may quote what it saw.
Overlapping spans: the more confident wins, ties go to the earlier start (then
the earlier submitted); the loser is rejected. Nothing here raises: every
rejection is data with a reason.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from judge_service.trace.decode import Trace
from judge_service.trace.markers import escape_view_text, strip_markers

MIN_EVIDENCE_CHARS = 8
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    label: str
    confidence: float
    evidence: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Rejection:
    span: Mapping[str, Any]
    reason: str


@dataclass
class ValidationReport:
    accepted: list[Span] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)

    def reasons_text(self) -> str:
        """The rejections as a repair prompt for the judge, one per line."""
        return "\n".join(f"- {dict(r.span)}: {r.reason}" for r in self.rejected)


def fold(text: str, *, quote: bool = True) -> str:
    """The comparison form of a text: view escapes, NFKC, whitespace collapsed; in a quote,
    the ⟦n⟧ markers it copied from the view are removed first. Trace text keeps its own
    marker-like text (escaped), which a quote can only match in its escaped form."""
    if quote:
        text = strip_markers(text)
    text = escape_view_text(unicodedata.normalize("NFKC", escape_view_text(text)))
    return _SPACE.sub(" ", text).strip()


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _check_one(
    raw: Mapping[str, Any], trace: Trace | None, num_tokens: int, labels: Collection[str]
) -> Span | str:
    if not isinstance(raw, Mapping):
        return "a span must be an object with start, end, label, confidence, evidence"
    start, end = _as_int(raw.get("start")), _as_int(raw.get("end"))
    if start is None or end is None:
        return "start and end must be integers (token indices, end exclusive)"
    n = num_tokens
    if not 0 <= start < end <= n:
        return f"out of range: need 0 <= start < end <= {n}, got start={start}, end={end}"
    label = raw.get("label")
    if not isinstance(label, str) or label not in labels:
        return f"unknown label {label!r}; known labels: {', '.join(sorted(labels))}"
    confidence = raw.get("confidence")
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not math.isfinite(confidence)
        or not 0.0 <= confidence <= 1.0
    ):
        return f"confidence must be a number in [0, 1], got {confidence!r}"
    evidence = raw.get("evidence")
    if not isinstance(evidence, str):
        return "evidence must be a quote (string) from inside the span"
    if trace is None:  # spans posted without their trace (/v1/credit): nothing to quote against
        return Span(start, end, label, float(confidence), evidence)
    span_text = fold(trace.span_text(start, end), quote=False)
    quote = fold(evidence)
    if len(quote) < min(MIN_EVIDENCE_CHARS, len(span_text)) or not quote:
        return (
            f"evidence too short: quote at least {MIN_EVIDENCE_CHARS} characters "
            "of the span (or the whole span if it is shorter)"
        )
    if quote not in span_text:
        return (
            f"evidence not found inside tokens [{start}, {end}); "
            f"the span's text begins {span_text[:80]!r}"
        )
    return Span(start, end, label, float(confidence), evidence)


def validate_spans(
    raw_spans: Sequence[Any],
    trace: Trace | None,
    labels: Collection[str],
    *,
    num_tokens: int | None = None,
) -> ValidationReport:
    """Check spans against `trace` (or, without one, only against `num_tokens`)."""
    if trace is not None:
        num_tokens = trace.num_tokens
    if num_tokens is None:
        raise ValueError("validate_spans needs a trace or num_tokens")
    report = ValidationReport()
    candidates: list[tuple[int, Span, Mapping[str, Any]]] = []
    for index, raw in enumerate(raw_spans):
        checked = _check_one(raw, trace, num_tokens, labels)
        if isinstance(checked, str):
            report.rejected.append(Rejection(_jsonable(raw), checked))
        else:
            candidates.append((index, checked, raw))
    candidates.sort(key=lambda item: (-item[1].confidence, item[1].start, item[0]))
    kept: list[Span] = []
    for _index, span, raw in candidates:
        rival = next((k for k in kept if k.start < span.end and span.start < k.end), None)
        if rival is None:
            kept.append(span)
            continue
        report.rejected.append(
            Rejection(
                _jsonable(raw),
                f"overlaps the span [{rival.start}, {rival.end}) ({rival.label}, "
                f"confidence {rival.confidence}), which wins",
            )
        )
    report.accepted = sorted(kept, key=lambda s: s.start)
    return report


def _jsonable(raw: Any) -> Mapping[str, Any]:
    if isinstance(raw, Mapping):
        return {str(k): v for k, v in raw.items()}
    return {"value": repr(raw)[:200]}
