"""Equal-reward groups: a judge's ranking or pairwise preferences as bounded relative
scores that sum to zero over the group, and as per-token credit inside the λ/κ budget.

How this composes with Dr. GRPO: in a group whose rewards are all equal, every rollout's
advantage A_i = r_i - mean(r) is 0, so today those groups teach nothing. A relative score
s_i in [-1, 1] with sum_i s_i = 0 adds λ·s_i to every response token of rollout i
(before the κ cap, together with its span credit), so the group's mean advantage stays
0: the judge reorders the group, it never raises or lowers it as a whole. In a mixed
group the outcome advantage is left as it is and the scores are not used.

Scores: each preference (winner, loser) gives the winner +1 and the loser -1; a tie
gives nothing; s_i is rollout i's net wins over G - 1 (the most pairs it can be in), so
a rollout preferred to every sibling scores 1. Every preference adds +1 and -1, so the
scores sum to zero whatever the preferences are, cycles included (a cycle nets to 0:
the judge contradicted itself, and nobody gains from it). A ranking is the preferences
of every pair it orders.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
Preference = tuple[int, int]  # (winner, loser)


def preferences_of_ranking(size: int, ranking: Sequence[Sequence[int]]) -> list[Preference]:
    """The pairs a ranking orders: `ranking` lists tiers best first, each a list of
    rollout indices (a tier of several is a tie). Every index of the group must appear
    exactly once."""
    seen: list[int] = [i for tier in ranking for i in tier]
    _check_indices(size, seen, "ranking")
    if sorted(seen) != list(range(size)):
        missing = sorted(set(range(size)) - set(seen))
        raise ValueError(f"ranking: rollouts {missing} are not ranked")
    out: list[Preference] = []
    for t, tier in enumerate(ranking):
        for worse in ranking[t + 1 :]:
            out += [(a, b) for a in tier for b in worse]
    return out


def relative_scores(size: int, preferences: Sequence[Preference]) -> list[float]:
    """Net wins over G - 1 (see the module docstring): in [-1, 1], summing to zero.
    A pair may be judged once; an index outside the group, a rollout against itself or a
    pair judged twice is a ValueError naming it."""
    if size < 2:
        raise ValueError(f"a group of {size} has no pairs to compare")
    pairs: set[tuple[int, int]] = set()
    net = [0] * size
    for winner, loser in preferences:
        _check_indices(size, [winner, loser], "preferences", allow_repeats=True)
        if winner == loser:
            raise ValueError(f"preferences: rollout {winner} is compared with itself")
        pair = (min(winner, loser), max(winner, loser))
        if pair in pairs:
            raise ValueError(f"preferences: the pair {pair} is judged twice")
        pairs.add(pair)
        net[winner] += 1
        net[loser] -= 1
    return [n / (size - 1) for n in net]


def _check_indices(
    size: int, indices: Sequence[int], field: str, *, allow_repeats: bool = False
) -> None:
    bad = [i for i in indices if not 0 <= i < size]
    if bad:
        raise ValueError(f"{field}: {bad} outside the group of {size} (0 to {size - 1})")
    if not allow_repeats and len(set(indices)) != len(indices):
        twice = sorted({i for i in indices if indices.count(i) > 1})
        raise ValueError(f"{field}: rollouts {twice} appear more than once")


def with_relative_score(
    credit: FloatArray,
    score: float,
    *,
    lam: float,
    budget: float,
    mask: FloatArray | None = None,
) -> tuple[FloatArray, float]:
    """A rollout's credit (already λ-scaled and κ-capped: `credit.token_credit`) plus
    λ·score on each of its tokens (where `mask` is 1), capped again so that its mean
    |credit| stays within `budget` (κ, or κ times the group's mean |A| under relative κ):
    the score never widens the budget. Returns the credit and the cap factor applied."""
    if not -1.0 <= score <= 1.0:
        raise ValueError(f"a relative score of {score} is outside [-1, 1]")
    term = np.full(credit.shape, lam * score, np.float64)
    if mask is not None:
        term *= mask
    raw = credit + term
    m = float(np.abs(raw).mean()) if raw.size else 0.0
    f = min(1.0, budget / m) if m > 0 else 1.0
    return f * raw, f
