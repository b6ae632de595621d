"""A judge's verdict from its window, its baseline and its canary runs: ok, drifting or bad.

Each measure scores its window against its baseline (Jensen–Shannon, `window.js_divergence`);
the verdict follows the worst measure past `drifting_score` or `bad_score`, and the reason
names it with the category whose share moved most. The share of sessions that failed
(fallback or failed) or of spans rejected rising `rate_rise` over the baseline's is `bad`
on its own (half as far: `drifting`). A canary run whose F1 fell
`f1_drop` under the judge's first run is `bad` on its own (half as far: `drifting`): a
canary reads the same records every time, so it separates a judge that changed from a
policy whose rollouts did.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from judge_service.drift.window import MIN_COUNT, Tally, js_divergence, shares

Level = Literal["ok", "drifting", "bad"]
LEVELS: tuple[Level, ...] = ("ok", "drifting", "bad")

# What each measure counts (docs/serving.md "Drift audit" has the table).
MEASURES = (
    "status",
    "labels",
    "spans",
    "rejections",
    "credit",
    "shadow_agreement",
    "shadow_integrity",
)


@dataclass(frozen=True)
class Thresholds:
    drifting_score: float
    bad_score: float
    f1_drop: float
    rate_rise: float = 0.2


@dataclass(frozen=True)
class MeasureScore:
    measure: str
    score: float | None  # None: too few counts on one side to score
    baseline: dict[str, float]  # shares
    window: dict[str, float]
    moved: str | None  # the category whose share moved most


@dataclass(frozen=True)
class Verdict:
    verdict: Level
    reason: str
    score: float  # the worst measure's divergence
    measures: list[MeasureScore] = field(default_factory=list)


def score_measures(baseline: Tally, window: Tally) -> list[MeasureScore]:
    out = []
    for measure in MEASURES:
        base, now = baseline.counts.get(measure, {}), window.counts.get(measure, {})
        enough = sum(base.values()) >= MIN_COUNT and sum(now.values()) >= MIN_COUNT
        before, after = shares(base), shares(now)
        moved = max(
            before.keys() | after.keys(),
            key=lambda c: (abs(after.get(c, 0.0) - before.get(c, 0.0)), c),
            default=None,
        )
        score = js_divergence(base, now) if enough else None
        out.append(MeasureScore(measure, score, before, after, moved))
    return out


def decide(
    baseline: Tally | None,
    window: Tally,
    limits: Thresholds,
    *,
    baseline_size: int,
    canary_f1: Sequence[float | None] = (),
) -> Verdict:
    """The verdict of one judge; `canary_f1`: its canary runs' F1, oldest first."""
    if baseline is None:
        return Verdict(
            "ok", f"collecting the baseline ({window.n} of {baseline_size} judgments)", 0.0
        )
    measures = score_measures(baseline, window)
    scored = [m for m in measures if m.score is not None]
    worst = max(scored, key=lambda m: m.score or 0.0, default=None)
    level: Level = "ok"
    reason = "every measure within its baseline"
    score = (worst.score or 0.0) if worst is not None else 0.0
    if worst is not None and score >= limits.drifting_score:
        level = "bad" if score >= limits.bad_score else "drifting"
        reason = _measure_reason(worst, limits)
    for found in (_rises(baseline, window, limits), _canary(canary_f1, limits)):
        if found is not None and LEVELS.index(found[0]) > LEVELS.index(level):
            level, reason = found
    return Verdict(level, reason, score, measures)


# The shares whose rise is a rule of its own: the divergence of a two-way split moves
# little for a large rise from a noisy base (4% -> 50% of sessions failing is 0.2 bits at
# best), and either is a judge's health, not the policy's.
RATES = (
    ("status", "sessions failed", lambda c: c != "ok"),
    ("rejections", "spans rejected", lambda c: c != "accepted"),
)


def _rises(baseline: Tally, window: Tally, limits: Thresholds) -> tuple[Level, str] | None:
    worst: tuple[float, str] | None = None
    for measure, what, counted in RATES:
        before, after = (_share(t, measure, counted) for t in (baseline, window))
        if before is None or after is None:
            continue
        rise = after - before
        if worst is None or rise > worst[0]:
            worst = (rise, f"{measure}: {what} {before:.0%} -> {after:.0%} (+{rise:.2f})")
    if worst is None or worst[0] < limits.rate_rise / 2:
        return None
    return ("bad" if worst[0] >= limits.rate_rise else "drifting"), worst[1]


def _share(tally: Tally, measure: str, counted: Callable[[str], bool]) -> float | None:
    counts = tally.counts.get(measure, {})
    total = sum(counts.values())
    if total < MIN_COUNT:
        return None
    return sum(v for c, v in counts.items() if counted(c)) / total


def _measure_reason(measure: MeasureScore, limits: Thresholds) -> str:
    score = measure.score or 0.0
    bound = limits.bad_score if score >= limits.bad_score else limits.drifting_score
    text = f"{measure.measure}: divergence {score:.3f} >= {bound:g}"
    if measure.moved is not None:
        before = measure.baseline.get(measure.moved, 0.0)
        after = measure.window.get(measure.moved, 0.0)
        text += f" ({measure.moved} {before:.0%} -> {after:.0%})"
    return text


def _canary(f1s: Sequence[float | None], limits: Thresholds) -> tuple[Level, str] | None:
    known = [f for f in f1s if f is not None]
    if len(known) < 2:
        return None
    first, last = known[0], known[-1]
    drop = first - last
    if drop >= limits.f1_drop:
        level: Level = "bad"
    elif drop >= limits.f1_drop / 2:
        level = "drifting"
    else:
        return None
    return level, f"canary: F1 {last:.3f}, down {drop:.3f} from the first run's {first:.3f}"
