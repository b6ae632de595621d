"""Lock-in: the first cut from which the answer stays at least 0.9 likely."""

from __future__ import annotations

import pytest

from judge_service.probe.lockin import lock_in_index, lockin_cuts, summarize


@pytest.mark.parametrize(
    ("probabilities", "expected"),
    [
        ([0.1, 0.95, 0.5, 0.92, 0.99], 3),  # an early spike that falls back does not count
        ([0.95, 0.96, 0.99], 0),  # sure before writing anything
        ([0.1, 0.2, 0.95, 0.97, 0.5], None),  # lost it again at the end: never locked in
        ([0.1, 0.2, 0.3], None),
        ([0.1, 0.9, 0.9], 1),  # the threshold itself counts
        ([0.1, 0.899999, 0.95], 2),
        ([], None),
    ],
)
def test_lock_in_index(probabilities: list[float], expected: int | None) -> None:
    assert lock_in_index(probabilities) == expected


def test_threshold_is_a_parameter() -> None:
    assert lock_in_index([0.1, 0.6, 0.7, 0.8], threshold=0.5) == 1
    assert lock_in_index([0.1, 0.6, 0.7, 0.8], threshold=0.75) == 3


def test_lockin_cuts() -> None:
    assert lockin_cuts(10_000, 4096) == [0, 4096, 8192, 10_000]
    assert lockin_cuts(8192, 4096) == [0, 4096, 8192]
    assert lockin_cuts(100, 4096) == [0, 100]
    with pytest.raises(ValueError):
        lockin_cuts(100, 0)


def test_summary_counts_tokens_after_lockin() -> None:
    records = [
        {"status": "ok", "num_tokens": 1000, "locked_at": 200, "tokens_after_lockin": 800},
        {"status": "ok", "num_tokens": 500, "locked_at": None, "tokens_after_lockin": 0},
        {"status": "ok", "num_tokens": 500, "locked_at": 400, "tokens_after_lockin": 100},
        {"status": "no_answer", "num_tokens": 300, "locked_at": None},
    ]
    summary = summarize(records)
    assert summary["n_traces"] == 4
    assert summary["n_scored"] == 3
    assert summary["n_locked"] == 2
    assert summary["tokens_after_lockin_total"] == 900
    assert summary["tokens_after_lockin_mean"] == 300
    assert summary["tokens_after_lockin_median"] == 100
    assert summary["fraction_of_tokens_after_lockin"] == pytest.approx(900 / 2000)
