"""A live service whose drift verdict is `bad`, made with the rules judge alone: its window
fills with rollouts that went wrong after a baseline of ones that went right (the label
mix moves from progress to errors), for the trainers' drift-watch tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from judge_service_client.client import JudgeClient

# What the service needs: a window small enough to fill in a test.
DRIFT_SETTINGS = {"drift_window": 20, "drift_chunk": 10}


def turn_bad(url: str, rollouts: Sequence[Mapping[str, Any]]) -> None:
    """Judge 20 right rollouts and pin them as the baseline (whatever the service judged
    before), then 40 wrong ones (the window holds nothing else), on the service at `url`."""
    right = [r for r in rollouts if r.get("reward") == 1.0]
    wrong = [r for r in rollouts if r.get("reward") == 0.0]
    options = {"judge": "rules", "use_cache": False}
    with JudgeClient(url) as client:
        client.judge_batch(
            [{**right[i % len(right)], "id": f"right-{i}"} for i in range(20)], options
        )
        client.pin_drift_baseline("rules")
        client.judge_batch(
            [{**wrong[i % len(wrong)], "id": f"wrong-{i}"} for i in range(40)], options
        )
        report = client.drift()
    assert report.verdict == "bad", report
