"""Equal-reward groups (judge_service/group/scores.py): relative scores are bounded and sum
to zero over the group, whatever the judge says; their credit stays within the budget
and, with one factor for the group, still sums to zero over its rollouts."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from judge_service.credit import group_advantages
from judge_service.group.scores import (
    credit_budget,
    preferences_of_ranking,
    relative_scores,
    score_credits,
    with_relative_score,
)

Judged = tuple[int, list[tuple[int, int]], list[tuple[int, int]]]


@st.composite
def judged_groups(draw: st.DrawFn) -> Judged:
    """A group size and distinct pairs, each won by either side (cycles too) or tied."""
    size = draw(st.integers(2, 16))
    pairs = list(itertools.combinations(range(size), 2))
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=len(pairs)))
    kinds = draw(st.lists(st.sampled_from("<>="), min_size=len(chosen), max_size=len(chosen)))
    wins = [(a, b) if k == "<" else (b, a) for (a, b), k in zip(chosen, kinds, strict=True)]
    picked = [w for w, k in zip(wins, kinds, strict=True) if k != "="]
    ties = [p for p, k in zip(chosen, kinds, strict=True) if k == "="]
    return size, picked, ties


@st.composite
def rankings(draw: st.DrawFn) -> tuple[int, list[list[int]]]:
    """A group size and a ranking of it: tiers best first, ties within a tier."""
    order = draw(st.permutations(list(range(draw(st.integers(2, 16))))))
    cuts = sorted(draw(st.sets(st.integers(1, len(order) - 1))))
    bounds = [0, *cuts, len(order)]
    return len(order), [list(order[a:b]) for a, b in itertools.pairwise(bounds)]


@given(judged_groups())
def test_scores_are_bounded_and_sum_to_zero(group: Judged) -> None:
    size, preferences, ties = group
    scores = relative_scores(size, preferences, ties)
    assert len(scores) == size
    assert all(-1.0 <= s <= 1.0 for s in scores)
    assert abs(sum(scores)) < 1e-9


@given(rankings())
def test_a_ranking_with_ties_orders_the_scores_by_tier(ranked: tuple[int, list[list[int]]]) -> None:
    size, tiers = ranked
    scores = relative_scores(size, preferences_of_ranking(size, tiers))
    assert abs(sum(scores)) < 1e-9 and all(-1.0 <= s <= 1.0 for s in scores)
    levels = [{scores[i] for i in tier} for tier in tiers]
    assert all(len(level) == 1 for level in levels)  # a tier scores as one
    firsts = [scores[tier[0]] for tier in tiers]
    assert firsts == sorted(firsts, reverse=True) and len(set(firsts)) == len(firsts)


@given(st.permutations(list(range(8))))
def test_a_full_ranking_spreads_scores_evenly(order: list[int]) -> None:
    scores = relative_scores(8, preferences_of_ranking(8, [[i] for i in order]))
    # Best 1, worst -1, each place 2/7 apart, in the ranking's order.
    assert [scores[i] for i in order] == pytest.approx([1 - 2 * k / 7 for k in range(8)])


def test_ties_and_cycles_give_nothing() -> None:
    assert relative_scores(3, preferences_of_ranking(3, [[0, 1, 2]])) == [0.0, 0.0, 0.0]
    assert relative_scores(3, [(0, 1), (1, 2), (2, 0)]) == [0.0, 0.0, 0.0]
    tiered = relative_scores(4, preferences_of_ranking(4, [[2], [0, 3], [1]]))
    # 2 beats all three, 1 loses to all three; 0 and 3 tie with each other.
    assert tiered == [0.0, -1.0, 1.0, 0.0]
    assert relative_scores(3, [(2, 0)], ties=[(0, 1), (1, 2)]) == [-0.5, 0.0, 0.5]


@pytest.mark.parametrize(
    ("call", "complaint"),
    [
        (lambda: preferences_of_ranking(3, [[0], [1]]), r"rollouts \[2\] are not ranked"),
        (lambda: preferences_of_ranking(3, [[0, 1], [1, 2]]), r"\[1\] appear more than once"),
        (lambda: preferences_of_ranking(2, [[0], [5]]), r"\[5\] outside the group of 2"),
        (lambda: preferences_of_ranking(2, [[0], [-1]]), r"\[-1\] outside the group of 2"),
        (lambda: relative_scores(3, [(0, 3)]), r"\[3\] outside the group of 3"),
        (lambda: relative_scores(3, [(1, 1)]), "compared with itself"),
        (lambda: relative_scores(3, [(0, 1), (1, 0)]), r"pair \(0, 1\) is judged twice"),
        (lambda: relative_scores(3, [(0, 1)], ties=[(1, 0)]), r"ties: the pair \(0, 1\)"),
        (lambda: relative_scores(3, [], ties=[(2, 2)]), "ties: rollout 2 is compared"),
        (lambda: relative_scores(1, []), "no pairs"),
    ],
)
def test_bad_rankings_are_refused_naming_the_problem(
    call: Callable[[], object], complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        call()


@st.composite
def scored_groups(draw: st.DrawFn) -> tuple[list[np.ndarray], list[float], list[np.ndarray]]:
    """Span credit already under κ = 0.25 (as token_credit leaves it), zero-sum scores and
    response masks, for rollouts of different lengths."""
    size, preferences, ties = draw(judged_groups())
    scores = relative_scores(size, preferences, ties)
    credits, masks = [], []
    for _ in range(size):
        n = draw(st.integers(0, 40))
        values = st.floats(-1, 1, allow_nan=False)
        c = draw(hnp.arrays(np.float64, n, elements=values))
        m = float(np.abs(c).mean()) if n else 0.0
        credits.append(c * min(1.0, 0.25 / m) if m > 0 else c)
        masks.append(draw(hnp.arrays(np.float64, n, elements=st.sampled_from([0.0, 1.0]))))
    return credits, scores, masks


@given(scored_groups(), st.sampled_from([0.05, 0.25, 1.0]))
def test_score_credit_stays_within_kappa_and_sums_to_zero_over_the_group(
    group: tuple[list[np.ndarray], list[float], list[np.ndarray]], lam: float
) -> None:
    credits, scores, masks = group
    kappa = 0.25
    totals, factor = score_credits(credits, scores, lam=lam, kappa=kappa, masks=masks)
    assert 0.0 <= factor <= 1.0
    added = []
    for c, t, s, m in zip(credits, totals, scores, masks, strict=True):
        assert t.shape == c.shape
        if t.size:
            assert float(np.abs(t).mean()) <= kappa + 1e-12
        # The score adds one value on the policy's tokens, nothing on the others.
        np.testing.assert_allclose(t - c, factor * lam * s * m, atol=1e-15)
        added.append(factor * lam * s)
    # What each rollout's tokens get sums to zero over the group: its mean advantage,
    # 0 under Dr. GRPO with equal rewards, is unchanged.
    assert abs(sum(added)) < 1e-9
    rewards = [1.0] * len(scores)
    assert {a.value for a in group_advantages(rewards, ["g"] * len(scores)) if a} == {0.0}


def test_one_factor_for_the_group_keeps_the_sum_where_a_cap_per_rollout_does_not() -> None:
    lam, kappa, tokens = 0.25, 0.1, 50
    scores = relative_scores(4, preferences_of_ranking(4, [[0], [1, 2, 3]]))
    assert scores == pytest.approx([1.0, -1 / 3, -1 / 3, -1 / 3])
    zeros = [np.zeros(tokens) for _ in scores]
    totals, factor = score_credits(zeros, scores, lam=lam, kappa=kappa)
    # The best rollout's λ·1 = 0.25 is over κ = 0.1: the whole group is scaled by 0.4.
    assert factor == pytest.approx(0.4)
    assert [float(t.mean()) for t in totals] == pytest.approx([0.1, *[-0.1 / 3] * 3])
    assert abs(sum(float(t.mean()) for t in totals)) < 1e-12
    # Capped one by one, only the best is scaled: the group's credit no longer sums to 0.
    alone = [
        with_relative_score(z, s, lam=lam, budget=kappa)[0]
        for z, s in zip(zeros, scores, strict=True)
    ]
    assert sum(float(t.mean()) for t in alone) == pytest.approx(0.1 - 0.25)


def test_span_credit_leaves_the_scores_what_room_it_has() -> None:
    lam, kappa = 0.25, 0.25
    spans = [np.full(10, -0.15), np.zeros(10)]  # the first already spends 0.15 of κ
    totals, factor = score_credits(spans, [-1.0, 1.0], lam=lam, kappa=kappa)
    assert factor == pytest.approx((0.25 - 0.15) / 0.25)
    assert float(np.abs(totals[0]).mean()) == pytest.approx(kappa)
    assert float(totals[1].mean()) == pytest.approx(0.1)
    # A masked token (a tool's output) gets none of it, and the cap counts only the rest.
    mask = np.ones(10)
    mask[:5] = 0
    totals, factor = score_credits(
        [np.zeros(10), np.zeros(10)], [1.0, -1.0], lam=lam, kappa=0.1, masks=[mask, None]
    )
    assert factor == pytest.approx(0.4)  # the unmasked rollout binds: 0.25 > 0.1
    assert not totals[0][:5].any()
    np.testing.assert_allclose(totals[0][5:], 0.1)


def test_relative_kappa_gives_an_equal_reward_group_no_score_credit() -> None:
    # κ times the group's mean |A|, and A is 0 everywhere: the budget is 0.
    assert credit_budget(0.25, "relative", 0.0) == 0.0
    assert credit_budget(0.25, "absolute", None) == 0.25
    credits = [np.zeros(4), np.zeros(4)]
    totals, factor = score_credits(
        credits, [1.0, -1.0], lam=0.25, kappa=0.25, kappa_mode="relative", group_scale=0.0
    )
    assert factor == 0.0 and not any(t.any() for t in totals)
    with pytest.raises(ValueError, match="group's mean"):
        score_credits(credits, [1.0, -1.0], lam=0.25, kappa=0.25, kappa_mode="relative")


@pytest.mark.parametrize(
    ("scores", "complaint"),
    [([1.0, 1.0], "do not sum to zero"), ([1.5, -1.5], r"not all in \[-1, 1\]"), ([0.0], "differ")],
)
def test_score_credit_refuses_scores_that_are_not_a_groups(
    scores: list[float], complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        score_credits([np.zeros(3), np.zeros(3)], scores, lam=0.25, kappa=0.25)
    with pytest.raises(ValueError, match="outside"):
        with_relative_score(np.zeros(3), 1.5, lam=0.25, budget=0.25)
