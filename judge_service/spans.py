"""Spans as validation leaves them: accepted spans, rejections with codes, and the limits.

A leaf module (no trace, no tokenizer): the credit math and clients use these
types without the server's dependencies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from judge_service import labels as L

# Rejection codes (stable: metrics, dashboards and repair prompts use them).
MALFORMED: Final = "malformed"  # not an object, or start/end not integers
OUT_OF_RANGE: Final = "out_of_range"
UNKNOWN_LABEL: Final = "unknown_label"
BAD_CONFIDENCE: Final = "bad_confidence"
EVIDENCE_TOO_SHORT: Final = "evidence_too_short"
EVIDENCE_NOT_FOUND: Final = "evidence_not_found"  # not inside the span (maybe elsewhere)
EVIDENCE_NOT_ANCHORED: Final = "evidence_not_anchored"  # inside, but not at the span's ends
SPAN_TOO_LONG: Final = "span_too_long"  # point label over the token cap, region over the share
CONTRADICTS_ARITHMETIC: Final = "contradicts_arithmetic"  # positive span over a false link
NO_PRIOR_INVALID: Final = "no_prior_invalid"  # correction / unsupported with no error before
FLOOD: Final = "flood"  # a third span starting on one line
TOO_MANY_SPANS: Final = "too_many_spans"  # over the per-submission cap
OVERLAP: Final = "overlap"

CODES: Final = (
    MALFORMED,
    OUT_OF_RANGE,
    UNKNOWN_LABEL,
    BAD_CONFIDENCE,
    EVIDENCE_TOO_SHORT,
    EVIDENCE_NOT_FOUND,
    EVIDENCE_NOT_ANCHORED,
    SPAN_TOO_LONG,
    CONTRADICTS_ARITHMETIC,
    NO_PRIOR_INVALID,
    FLOOD,
    TOO_MANY_SPANS,
    OVERLAP,
)

# Labels that may cover a long stretch; every other label marks a point in the trace.
REGION_LABELS: Final = frozenset({L.UNPRODUCTIVE_REPETITION, L.NEUTRAL})
# Labels that only mean something after an accepted `invalid` earlier in the trace.
NEEDS_PRIOR_INVALID: Final = frozenset({L.VERIFIED_CORRECTION, L.UNSUPPORTED})


@dataclass(frozen=True)
class SpanLimits:
    """The structural limits of DESIGN "Span validation" (settings JUDGE_MAX_*)."""

    max_point_tokens: int = 512
    max_region_share: float = 0.5
    max_spans: int = 256
    max_per_line: int = 2

    def key(self) -> dict[str, float]:
        return {
            "max_point_tokens": self.max_point_tokens,
            "max_region_share": self.max_region_share,
            "max_spans": self.max_spans,
            "max_per_line": self.max_per_line,
        }


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    label: str
    confidence: float
    evidence: str
    evidence_end: str | None = None
    score: float | None = None  # a continuous score (value judge); None: the label's score

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "start": self.start,
            "end": self.end,
            "label": self.label,
            "confidence": self.confidence,
            "evidence": self.evidence,
        }
        if self.evidence_end is not None:
            out["evidence_end"] = self.evidence_end
        return out


@dataclass(frozen=True)
class Rejection:
    span: Mapping[str, Any]
    code: str
    reason: str
    round: int = 1


@dataclass
class ValidationReport:
    accepted: list[Span] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)

    def reasons_text(self) -> str:
        """The rejections as a repair prompt for the judge, one per line."""
        return "\n".join(f"- {_brief(r.span)} [{r.code}]: {r.reason}" for r in self.rejected)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for rejection in self.rejected:
            out[rejection.code] = out.get(rejection.code, 0) + 1
        return out


def _brief(span: Mapping[str, Any]) -> str:
    keys = ("start", "end", "label")
    return "{" + ", ".join(f"{k}: {span.get(k)!r}" for k in keys if k in span) + "}"


def as_int(value: object) -> int | None:
    """A JSON token index as an int: an integer, or a float with no fraction; never a bool."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None
