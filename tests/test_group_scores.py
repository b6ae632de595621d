"""Equal-reward groups (judge_service/group/scores.py): relative scores are bounded and sum
to zero over the group, whatever the judge says; their credit stays within the budget."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from judge_service.group.scores import (
    preferences_of_ranking,
    relative_scores,
    with_relative_score,
)


@st.composite
def judged_groups(draw: st.DrawFn) -> tuple[int, list[tuple[int, int]]]:
    """A group size and any set of distinct pairs, each won by either side (cycles too)."""
    size = draw(st.integers(2, 16))
    pairs = list(itertools.combinations(range(size), 2))
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=len(pairs)))
    flips = draw(st.lists(st.booleans(), min_size=len(chosen), max_size=len(chosen)))
    return size, [(b, a) if flip else (a, b) for (a, b), flip in zip(chosen, flips, strict=True)]


@given(judged_groups())
def test_scores_are_bounded_and_sum_to_zero(group: tuple[int, list[tuple[int, int]]]) -> None:
    size, preferences = group
    scores = relative_scores(size, preferences)
    assert len(scores) == size
    assert all(-1.0 <= s <= 1.0 for s in scores)
    assert abs(sum(scores)) < 1e-9


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


@pytest.mark.parametrize(
    ("call", "complaint"),
    [
        (lambda: preferences_of_ranking(3, [[0], [1]]), r"rollouts \[2\] are not ranked"),
        (lambda: preferences_of_ranking(3, [[0, 1], [1, 2]]), r"\[1\] appear more than once"),
        (lambda: preferences_of_ranking(2, [[0], [5]]), r"\[5\] outside the group of 2"),
        (lambda: relative_scores(3, [(0, 3)]), r"\[3\] outside the group of 3"),
        (lambda: relative_scores(3, [(1, 1)]), "compared with itself"),
        (lambda: relative_scores(3, [(0, 1), (1, 0)]), r"pair \(0, 1\) is judged twice"),
        (lambda: relative_scores(1, []), "no pairs"),
    ],
)
def test_bad_rankings_are_refused_naming_the_problem(call: object, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        call()  # type: ignore[operator]


def test_score_credit_stays_within_the_budget_and_keeps_the_group_mean() -> None:
    lam, kappa, tokens = 0.25, 0.1, 50
    scores = relative_scores(4, preferences_of_ranking(4, [[3], [1], [0], [2]]))
    credits = [
        with_relative_score(np.zeros(tokens), s, lam=lam, budget=kappa)[0] for s in scores
    ]
    # λ·|s| is up to 0.25 here: capped to κ.
    assert all(float(np.abs(c).mean()) <= kappa + 1e-12 for c in credits)
    # Equal lengths, no span credit: the group's summed per-token credit is zero.
    assert abs(sum(float(c.sum()) for c in credits)) < 1e-9
    # A masked token (a tool's output) gets none of it.
    mask = np.ones(tokens)
    mask[:10] = 0
    masked, _ = with_relative_score(np.zeros(tokens), 1.0, lam=lam, budget=1.0, mask=mask)
    assert not masked[:10].any() and (masked[10:] == lam).all()
    # Added to span credit, the cap applies to the sum.
    spans = np.full(tokens, 0.08)
    total, factor = with_relative_score(spans, 1.0, lam=lam, budget=kappa)
    assert factor == pytest.approx(kappa / (0.08 + lam))
    assert float(np.abs(total).mean()) == pytest.approx(kappa)
    with pytest.raises(ValueError, match="outside"):
        with_relative_score(spans, 1.5, lam=lam, budget=kappa)
