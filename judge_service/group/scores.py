"""Equal-reward groups: a judge's ranking or pairwise preferences as bounded relative
scores that sum to zero over the group, and as per-token credit inside the λ/κ budget.

How this composes with Dr. GRPO: in a group whose rewards are all equal, every rollout's
advantage A_i = r_i - mean(r) is 0 on every token, so today those groups teach nothing.
A relative score s_i in [-1, 1] with sum_i s_i = 0 adds g·λ·s_i to every policy token of
rollout i (`score_credits`), on top of its span credit, with one factor g in [0, 1] for
the whole group. That term has the shape of A_i itself: constant over a rollout's
tokens, zero-mean over the group's rollouts, so the group's mean advantage stays 0 and
the judge reorders the group, never raises or lowers it as a whole. (Like A_i under
Dr. GRPO's constant normaliser, a longer rollout's term weighs in over more tokens.)
g is the largest factor that keeps every rollout's mean |credit| within its budget B
(κ, or κ·mean_j |A_j| under relative κ: credit.token_credit's cap): per rollout,
mean|c_i + g·λ·s_i·mask_i| <= mean|c_i| + g·λ·|s_i|·mean|mask_i| <= B. One factor, not
one per rollout: a cap that shrank only the rollouts whose span credit is large would
leave the scores' credit summing to non-zero. Under relative κ, B is 0 in an
equal-reward group, so the scores add nothing, as the span credit does not. In a mixed
group the outcome advantage carries the signal and the scores are not used.

Scores: each preference (winner, loser) gives the winner +1 and the loser -1; a tie
gives nothing; s_i is rollout i's net wins over G - 1 (the most pairs it can be in), so
a rollout preferred to every sibling scores 1. Every preference adds +1 and -1, so the
scores sum to zero whatever the preferences are, cycles included (a cycle nets to 0:
the judge contradicted itself, and nobody gains from it). A pair judged twice, also
both ways or as a win and a tie, is refused: that is no judgment. A ranking is the
preferences of every pair it orders, ties within a tier.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from judge_service.credit import KappaMode

FloatArray = npt.NDArray[np.float64]
Preference = tuple[int, int]  # (winner, loser)
# How far from zero a group's scores may sum and still count as zero-sum (float error).
ZERO_SUM_TOLERANCE = 1e-9


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


def relative_scores(
    size: int, preferences: Sequence[Preference], ties: Sequence[tuple[int, int]] = ()
) -> list[float]:
    """Net wins over G - 1 (see the module docstring): in [-1, 1], summing to zero.
    `ties` are pairs judged equal (they score nothing, but count as judged). A pair may
    be judged once; an index outside the group, a rollout against itself or a pair
    judged twice is a ValueError naming it."""
    if size < 2:
        raise ValueError(f"a group of {size} has no pairs to compare")
    pairs: set[tuple[int, int]] = set()
    net = [0] * size
    judged = [(w, lo, 1) for w, lo in preferences] + [(a, b, 0) for a, b in ties]
    for a, b, won in judged:
        field = "preferences" if won else "ties"
        _check_indices(size, [a, b], field, allow_repeats=True)
        if a == b:
            raise ValueError(f"{field}: rollout {a} is compared with itself")
        pair = (min(a, b), max(a, b))
        if pair in pairs:
            raise ValueError(f"{field}: the pair {pair} is judged twice")
        pairs.add(pair)
        net[a] += won
        net[b] -= won
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


def credit_budget(kappa: float, kappa_mode: KappaMode, group_scale: float | None) -> float:
    """The bound on a rollout's mean |credit|, as `credit.token_credit` sets it."""
    if kappa_mode == "relative":
        if group_scale is None:
            raise ValueError("kappa_mode relative needs the group's mean |advantage|")
        return kappa * group_scale
    return kappa


def score_credits(
    credits: Sequence[FloatArray],
    scores: Sequence[float],
    *,
    lam: float,
    kappa: float,
    kappa_mode: KappaMode = "absolute",
    group_scale: float | None = None,
    masks: Sequence[FloatArray | None] | None = None,
) -> tuple[list[FloatArray], float]:
    """Each rollout's credit (already λ-scaled and κ-capped: `credit.token_credit`) plus
    g·λ·s_i on each of its tokens where its mask (the response_mask as 0/1 floats) is 1,
    with the one group factor g of the module docstring. Returns the credits and g.
    The scores must be a group's (`relative_scores`): in [-1, 1], summing to zero."""
    if len(credits) != len(scores) or (masks is not None and len(masks) != len(scores)):
        raise ValueError(f"{len(credits)} credit arrays, {len(scores)} scores and masks differ")
    if any(not -1.0 <= s <= 1.0 for s in scores):
        raise ValueError(f"relative scores {list(scores)} are not all in [-1, 1]")
    if abs(sum(scores)) > ZERO_SUM_TOLERANCE:
        raise ValueError(f"relative scores {list(scores)} do not sum to zero")
    bound = credit_budget(kappa, kappa_mode, group_scale)
    weights = [_weights(c, None if masks is None else masks[i]) for i, c in enumerate(credits)]
    factor = 1.0
    for c, s, w in zip(credits, scores, weights, strict=True):
        if w.shape != c.shape:
            raise ValueError(f"a mask of {w.shape} for {c.shape[0]} tokens")
        need = lam * abs(s) * float(np.abs(w).mean()) if c.size else 0.0
        if need > 0:
            room = max(0.0, bound - float(np.abs(c).mean()))
            factor = min(factor, room / need)
    totals = [c + (factor * lam * s) * w for c, s, w in zip(credits, scores, weights, strict=True)]
    return totals, factor


def _weights(credit: FloatArray, mask: FloatArray | None) -> FloatArray:
    """The tokens a score reaches: the mask's, all of them without one."""
    return np.ones(credit.shape, np.float64) if mask is None else mask


def with_relative_score(
    credit: FloatArray,
    score: float,
    *,
    lam: float,
    budget: float,
    mask: FloatArray | None = None,
) -> tuple[FloatArray, float]:
    """One rollout's credit plus λ·score on each of its tokens (where `mask` is 1),
    capped again on its own so that its mean |credit| stays within `budget`. Returns the
    credit and the cap factor applied. Capped per rollout, a group's score credit no
    longer sums to zero where the cap binds on some rollouts only: `score_credits`
    caps the group with one factor."""
    if not -1.0 <= score <= 1.0:
        raise ValueError(f"a relative score of {score} is outside [-1, 1]")
    term = np.full(credit.shape, lam * score, np.float64)
    if mask is not None:
        term *= mask
    raw = credit + term
    m = float(np.abs(raw).mean()) if raw.size else 0.0
    f = min(1.0, budget / m) if m > 0 else 1.0
    return f * raw, f
