"""Credit formulas of docs/design.md: scores, min_confidence, λ, κ cap, Dr. GRPO, judge share."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from judge_service import credit
from judge_service.labels import DEFAULT_LABEL_SCORES
from judge_service.spans import Span


def _spans() -> list[Span]:
    return [
        Span(0, 4, "invalid", 0.9, "x"),
        Span(4, 6, "valid_progress", 0.8, "x"),
        Span(8, 10, "verified_correction", 0.3, "x"),  # below min_confidence: scores 0
    ]


def test_uncapped_credit_is_lambda_times_score() -> None:
    got = credit.token_credit(
        10, _spans(), DEFAULT_LABEL_SCORES, lam=0.25, kappa=10.0, min_confidence=0.5
    )
    expected = np.array([-1, -1, -1, -1, 0.5, 0.5, 0, 0, 0, 0]) * 0.25
    np.testing.assert_allclose(got.values, expected)
    assert got.scale == 1.0


def test_kappa_caps_the_mean_absolute_credit() -> None:
    got = credit.token_credit(
        10, _spans(), DEFAULT_LABEL_SCORES, lam=1.0, kappa=0.1, min_confidence=0.5
    )
    m = (4 * 1.0 + 2 * 0.5) / 10
    assert got.scale == pytest.approx(0.1 / m)
    assert np.abs(got.values).mean() == pytest.approx(0.1)


def test_no_spans_no_credit() -> None:
    got = credit.token_credit(5, [], DEFAULT_LABEL_SCORES, lam=0.25, kappa=0.25, min_confidence=0.5)
    assert not got.values.any() and got.scale == 1.0


def test_dr_grpo_advantages_are_mean_centred_without_std() -> None:
    adv = credit.group_advantages([1.0, 0.0, 0.0, 1.0, None, 3.0], ["a", "a", "a", "a", "a", None])
    assert [None if a is None else a.value for a in adv] == [0.5, -0.5, -0.5, 0.5, None, None]
    assert all(a is not None and a.group_scale == 0.5 for a in adv[:4])  # mean |A_j|


def test_the_default_absolute_cap_never_binds() -> None:
    """λ = κ = 0.25 and |score| <= 1: m <= 0.25, so f is 1 even with every token invalid."""
    every = [Span(0, 10, "invalid", 1.0, "x")]
    got = credit.token_credit(
        10, every, DEFAULT_LABEL_SCORES, lam=0.25, kappa=0.25, min_confidence=0.5
    )
    assert got.scale == 1.0 and got.values[0] == -0.25


def test_relative_kappa_ties_credit_to_the_group_signal() -> None:
    spans = [Span(0, 10, "invalid", 1.0, "x")]
    args = {"lam": 0.25, "kappa": 0.25, "min_confidence": 0.5, "kappa_mode": "relative"}
    got = credit.token_credit(10, spans, DEFAULT_LABEL_SCORES, group_scale=0.4, **args)
    assert np.abs(got.values).mean() == pytest.approx(0.25 * 0.4)  # κ·mean|A| < m = 0.25
    uniform = credit.token_credit(10, spans, DEFAULT_LABEL_SCORES, group_scale=0.0, **args)
    assert not uniform.values.any()  # an all-equal group: no outcome signal, no judge credit
    with pytest.raises(ValueError, match="relative"):
        credit.token_credit(10, spans, DEFAULT_LABEL_SCORES, **args)


def test_judge_share() -> None:
    c1 = np.array([0.25, -0.25, 0.0, 0.0])
    c2 = np.zeros(2)
    a, b = credit.GroupAdvantage(0.5, 0.5), credit.GroupAdvantage(-0.5, 0.5)
    share = credit.judge_share([c1, c2], [a, b])
    assert share == pytest.approx(0.5 / (4 * 0.5 + 2 * 0.5 + 0.5))
    assert credit.judge_share([np.zeros(3)], [None]) is None
    assert (
        credit.judge_share([c1], [credit.GroupAdvantage(0.0, 0.0)]) == 1.0
    )  # all-equal group: judge is the only signal


@pytest.mark.parametrize("encoding", ["dense", "spans", "base64-f32"])
def test_encodings_round_trip(encoding: credit.Encoding) -> None:
    values = np.array([0.0, -0.25, -0.25, 0.125, 0.0, 0.5], np.float64)
    payload = credit.encode(values, encoding)
    np.testing.assert_allclose(credit.decode(payload, len(values), encoding), values, rtol=1e-6)
    if encoding == "spans":
        assert payload == [
            {"start": 1, "end": 3, "value": -0.25},
            {"start": 3, "end": 4, "value": 0.125},
            {"start": 5, "end": 6, "value": 0.5},
        ]


@pytest.mark.parametrize("lam", [0.0, 0.3, 1.0])
def test_the_cap_is_measured_on_the_mean_and_scores_may_be_given(lam: float) -> None:
    # The scale divides kappa by mean |lam * c| as ndarray.mean() makes it, and scores
    # given by the caller (`judgment.to_result`: span_scores once a result) change nothing.
    spans = [
        Span(0, 3, "valid_progress", 0.9, "q"),
        Span(3, 4, "invalid", 0.7, "q"),
        Span(6, 7, "verified_correction", 0.4, "q"),
    ]
    knobs: dict[str, Any] = {"lam": lam, "kappa": 0.01, "min_confidence": 0.5}
    made = credit.token_credit(9, spans, DEFAULT_LABEL_SCORES, **knobs)
    given = credit.token_credit(
        9,
        spans,
        DEFAULT_LABEL_SCORES,
        scores=credit.span_scores(spans, DEFAULT_LABEL_SCORES, 0.5),
        **knobs,
    )
    assert made.scale == given.scale and np.array_equal(made.values, given.values)
    raw = credit.token_credit(9, spans, DEFAULT_LABEL_SCORES, **{**knobs, "kappa": 1e9}).values
    m = float(np.abs(raw).mean())
    assert made.scale == (min(1.0, 0.01 / m) if m > 0 else 1.0)
