"""Spans as validation leaves them: accepted spans, rejections with codes, and the limits.

A leaf module (no trace, no tokenizer): the credit math and clients use these
types without the server's dependencies.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from judge_service import labels as L

# The rules a cached judgment was validated under (part of the cache key): a judgment
# validated before a rule existed is judged again, not served.
VALIDATION_VERSION: Final = "lines-1"

# Rejection codes (stable: metrics, dashboards and repair prompts use them).
MALFORMED: Final = "malformed"  # not an object, or start/end not integers
OUT_OF_RANGE: Final = "out_of_range"
UNKNOWN_LABEL: Final = "unknown_label"
BAD_CONFIDENCE: Final = "bad_confidence"
EVIDENCE_TOO_SHORT: Final = "evidence_too_short"
EVIDENCE_NOT_FOUND: Final = "evidence_not_found"  # not inside the span (maybe elsewhere)
EVIDENCE_NOT_ANCHORED: Final = "evidence_not_anchored"  # inside, but not at the span's ends
SPAN_TOO_LONG: Final = "span_too_long"  # point label over the token cap, region over the share
# A positive span on a line holding a false link; an invalid on a line proven true.
CONTRADICTS_ARITHMETIC: Final = "contradicts_arithmetic"
BUILT_ON_ERROR: Final = "built_on_error"  # positive span on a line using an error's value
WRONG_FINAL_ANSWER: Final = "wrong_final_answer"  # positive span on an answer judged wrong
NO_PRIOR_INVALID: Final = "no_prior_invalid"  # correction / unsupported with no error before
FLOOD: Final = "flood"  # a third span starting on one line
TOO_MANY_SPANS: Final = "too_many_spans"  # over the per-submission cap
OVERLAP: Final = "overlap"
# A contrast (a group sibling's span cited as evidence) that is malformed, outside the
# group or the sibling, or whose quote the sibling's tokens do not hold.
CONTRAST_NOT_ANCHORED: Final = "contrast_not_anchored"

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
    BUILT_ON_ERROR,
    WRONG_FINAL_ANSWER,
    NO_PRIOR_INVALID,
    FLOOD,
    TOO_MANY_SPANS,
    OVERLAP,
    CONTRAST_NOT_ANCHORED,
)

# Labels that may cover a long stretch; every other label marks a point in the trace.
REGION_LABELS: Final = frozenset({L.UNPRODUCTIVE_REPETITION, L.NEUTRAL})
# Labels that only mean something after an accepted `invalid` earlier in the trace.
NEEDS_PRIOR_INVALID: Final = frozenset({L.VERIFIED_CORRECTION, L.UNSUPPORTED})


@dataclass(frozen=True)
class SpanLimits:
    """The structural limits of docs/design.md "Span validation" (settings JUDGE_MAX_*)."""

    max_point_tokens: int = 512
    max_region_share: float = 0.5  # of the trace, for all region spans together
    max_spans: int = 256
    max_per_line: int = 2
    # An invalid below this confidence scores nothing, so it unlocks no correction or
    # dependence (the server's default min_confidence; a request's own is applied to the
    # credit, see `unlocked`).
    unlock_confidence: float = 0.5

    def point_cap(self, num_tokens: int) -> int:
        """The most tokens a point label may cover: the cap, and at most half the trace."""
        return min(self.max_point_tokens, max(1, num_tokens // 2))

    def region_budget(self, num_tokens: int) -> int:
        """The most tokens all region spans of one trace may cover together."""
        return max(1, math.floor(self.max_region_share * num_tokens))

    def key(self) -> dict[str, float]:
        return {
            "max_point_tokens": self.max_point_tokens,
            "max_region_share": self.max_region_share,
            "max_spans": self.max_spans,
            "max_per_line": self.max_per_line,
            "unlock_confidence": self.unlock_confidence,
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
    # A group sibling's tokens cited as evidence and checked (group/contrast.py): the
    # sibling's index in the group, start, end.
    contrast: tuple[int, int, int] | None = None

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
    keys = ("rollout", "start", "end", "label")
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


def unlocked(spans: Sequence[Span], min_confidence: float) -> list[bool]:
    """Which of `spans` (disjoint) stand on an error (docs/concepts.md "Validation: what a
    span must show", structure): every span but a ``verified_correction`` or
    ``unsupported`` does; those need an ``invalid`` that ends before them and scores
    (confidence >= `min_confidence`), and each such invalid unlocks at most one
    ``verified_correction`` (one mistake, one repair): corrections are matched most
    confident first, each to the nearest unmatched invalid before it. A dependence
    (``unsupported``) needs no invalid of its own."""
    return unlocked_columns(
        [s.start for s in spans],
        [s.end for s in spans],
        [s.label for s in spans],
        [s.confidence for s in spans],
        min_confidence,
    )


def unlocked_columns(
    starts: Sequence[int],
    ends: Sequence[int],
    labels: Sequence[str],
    confidences: Sequence[float],
    min_confidence: float,
) -> list[bool]:
    """`unlocked` of spans given as columns (the rules judge's thousands of candidates)."""
    invalid_ends = sorted(
        end
        for end, label, confidence in zip(ends, labels, confidences, strict=True)
        if label == L.INVALID and confidence >= min_confidence
    )
    needs = NEEDS_PRIOR_INVALID
    out = [label not in needs for label in labels]
    first = invalid_ends[0] if invalid_ends else None
    corrections: list[int] = []
    for k, label in enumerate(labels):
        if label == L.VERIFIED_CORRECTION:
            corrections.append(k)
        elif label in needs:  # a dependence: any scoring invalid before it
            out[k] = first is not None and first <= starts[k]
    used = [False] * len(invalid_ends)
    for k in sorted(corrections, key=lambda k: (-confidences[k], starts[k], k)):
        at = bisect.bisect_right(invalid_ends, starts[k]) - 1  # invalids ending by its start
        while at >= 0 and used[at]:  # bounded: a submission holds at most max_spans spans
            at -= 1
        if at >= 0:
            used[at] = out[k] = True
    return out


def merge_spans(spans: Sequence[Span], added: Sequence[Span]) -> list[Span]:
    """`spans` (a judge's, accepted) with `added` (the service's own) where no span of
    `spans` touches their tokens: the judge's label of a step stands, and spans never
    overlap. In token order."""
    taken = [(s.start, s.end) for s in spans]
    kept = [p for p in added if not any(a < p.end and p.start < b for a, b in taken)]
    return sorted([*spans, *kept], key=lambda s: (s.start, s.end))
