"""Counts of what a judge did, per measure and category, and how far two of them differ.

A `Tally` is the unit everything else moves: a process counts its judgments into one,
writes it to the store as a chunk once it holds ``JUDGE_DRIFT_CHUNK`` judgments, and the
window is the newest chunks that hold ``JUDGE_DRIFT_WINDOW`` judgments. Counts, not
rates, so chunks from any number of workers add up exactly.

The distance is the Jensen–Shannon divergence in bits: symmetric, defined where one side
has a category the other lacks (a judge that starts using a label), and bounded by 1, so
one threshold serves every measure. Each count gets half a count added (the Krichevsky–
Trofimov estimate) so that two small samples of one distribution do not look apart.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# A measure is scored only when both sides counted at least this much of it: the
# divergence of a handful of counts is noise.
MIN_COUNT = 20
SMOOTHING = 0.5


@dataclass
class Tally:
    """Judgments counted: `n` of them, and per measure the count of each category."""

    n: int = 0
    counts: dict[str, dict[str, float]] = field(default_factory=dict)
    first_t: float = 0.0  # unix time of the first and last judgment counted
    last_t: float = 0.0

    def add(self, measure: str, category: str, amount: float = 1.0) -> None:
        bucket = self.counts.get(measure)
        if bucket is None:
            bucket = self.counts[measure] = {}
        bucket[category] = bucket.get(category, 0.0) + amount

    def stamp(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        self.first_t = self.first_t or now
        self.last_t = now

    def merge(self, other: Tally) -> None:
        self.n += other.n
        for measure, bucket in other.counts.items():
            for category, amount in bucket.items():
                self.add(measure, category, amount)
        if other.first_t:
            self.first_t = min(self.first_t or other.first_t, other.first_t)
        self.last_t = max(self.last_t, other.last_t)

    def total(self, measure: str) -> float:
        return sum(self.counts.get(measure, {}).values())

    def to_json(self) -> dict[str, Any]:
        return {"n": self.n, "counts": self.counts, "first_t": self.first_t, "last_t": self.last_t}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Tally:
        # Read back what `to_json` wrote (a chunk a process of this service stored): counts
        # are numbers already, and a window reads tens of chunks per scoring.
        counts = {str(m): dict(bucket) for m, bucket in dict(data.get("counts", {})).items()}
        return cls(
            n=int(data.get("n", 0)),
            counts=counts,
            first_t=float(data.get("first_t", 0.0)),
            last_t=float(data.get("last_t", 0.0)),
        )

    @classmethod
    def summed(cls, tallies: Iterable[Tally]) -> Tally:
        out = cls()
        for tally in tallies:
            out.merge(tally)
        return out


def js_divergence(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    """Jensen–Shannon divergence (bits, in [0, 1]) of two count vectors over the union of
    their categories, each count smoothed by `SMOOTHING`."""
    categories = sorted(p.keys() | q.keys())
    if not categories:
        return 0.0
    a = [p.get(c, 0.0) + SMOOTHING for c in categories]
    b = [q.get(c, 0.0) + SMOOTHING for c in categories]
    sa, sb = sum(a), sum(b)
    total = 0.0
    for x, y in zip(a, b, strict=True):
        px, qy = x / sa, y / sb
        m = (px + qy) / 2
        total += px * math.log2(px / m) + qy * math.log2(qy / m)
    return max(0.0, min(1.0, total / 2))


def shares(counts: Mapping[str, float]) -> dict[str, float]:
    total = sum(counts.values())
    return {c: v / total for c, v in sorted(counts.items())} if total else {}


def newest(chunks: Sequence[Tally], size: int) -> Tally:
    """The window: the newest chunks, back until they hold `size` judgments."""
    taken: list[Tally] = []
    held = 0
    for chunk in reversed(chunks):
        if held >= size:
            break
        taken.append(chunk)
        held += chunk.n
    return Tally.summed(taken)


def oldest(chunks: Sequence[Tally], size: int) -> Tally | None:
    """The baseline candidate: the first chunks holding `size` judgments; None until they do."""
    taken: list[Tally] = []
    held = 0
    for chunk in chunks:
        taken.append(chunk)
        held += chunk.n
        if held >= size:
            return Tally.summed(taken)
    return None
