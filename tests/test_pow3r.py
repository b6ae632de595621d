"""POW3R criterion weights: the math's invariants, the route over real HTTP, and the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from judge_service.api.app import create_app
from judge_service.cli.main import main
from judge_service.config import Settings
from judge_service.methods.pow3r import criterion_weights
from tests.conftest import LiveServer

HUMAN = [3.0, 1.0, 2.0, 2.0]
CATEGORIES = ["accuracy", "accuracy", "style", "style"]


def test_equal_separation_keeps_the_human_ratios() -> None:
    rng = np.random.default_rng(0)
    base = rng.random(8)
    # Every criterion separates the group equally (the same spread, shifted per criterion).
    scores = np.stack([base, base + 0.1, 1 - base, base * 1.0 - 0.2], axis=1)
    w, sigma = criterion_weights(scores, HUMAN, CATEGORIES, emphasis=1.0)
    np.testing.assert_allclose(sigma, sigma[0])
    np.testing.assert_allclose(w, np.asarray(HUMAN) / sum(HUMAN), atol=1e-12)


@pytest.mark.parametrize("emphasis", [0.3, 0.5, 1.0])
def test_weight_moves_toward_the_separating_criterion(emphasis: float) -> None:
    rng = np.random.default_rng(1)
    scores = np.full((6, 4), 0.5)
    scores[:, 1] = rng.random(6)  # only criterion 1 tells the rollouts apart
    scores[:, 2] = [0.2, 0.3, 0.2, 0.3, 0.2, 0.3]  # criterion 2 a little
    h = np.asarray(HUMAN) / sum(HUMAN)
    w, _ = criterion_weights(scores, HUMAN, CATEGORIES, emphasis=emphasis)
    assert w[1] > h[1] and w[0] < h[0]
    assert w[2] > h[2] and w[3] < h[3]
    # Category balance: each category keeps its human total; the weights sum to 1.
    assert w[:2].sum() == pytest.approx(h[:2].sum())
    assert w[2:].sum() == pytest.approx(h[2:].sum())
    assert (w >= 0).all() and w.sum() == pytest.approx(1.0)
    # Emphasis 0 is the human weights; no separation at all leaves them too.
    np.testing.assert_allclose(criterion_weights(scores, HUMAN, CATEGORIES, 0.0)[0], h)
    flat = np.full((6, 4), 0.7)
    np.testing.assert_allclose(criterion_weights(flat, HUMAN, CATEGORIES, emphasis)[0], h)


BODY = {
    "criteria": [
        {"name": "correct", "weight": 3, "category": "accuracy"},
        {"name": "units", "weight": 1, "category": "accuracy"},
        {"name": "clear", "weight": 2, "category": "style"},
    ],
    "scores": [[1, 1, 0.5], [1, 0, 0.5], [1, 1, 0.5]],
    "rollout_ids": ["a", "b", "c"],
}


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with LiveServer(create_app(Settings())) as live, httpx.Client(base_url=live.url) as c:
        yield c


def test_the_route(client: httpx.Client) -> None:
    answer = client.post("/v1/rubric/weights", json=BODY)
    assert answer.status_code == 200, answer.text
    out = answer.json()
    weights = {c["name"]: c["weight"] for c in out["criteria"]}
    # Only `units` separates the group: it gains weight from `correct` within accuracy,
    # whose total stays 4/6; style (nothing separates) keeps its 2/6.
    assert weights["units"] > 1 / 6 and weights["correct"] < 3 / 6
    assert weights["clear"] == pytest.approx(2 / 6)
    assert weights["units"] + weights["correct"] == pytest.approx(4 / 6)
    assert out["rollout_ids"] == ["a", "b", "c"]
    assert out["rewards"][0] > out["rewards"][1] == pytest.approx(weights["correct"] + 0.5 / 3)
    assert len(out["human_rewards"]) == 3


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"scores": [[1, 1], [1, 0, 0.5]]}, "scores"),
        ({"criteria": [{"name": "x", "weight": 0}]}, "criteria"),
        ({"rollout_ids": ["a"]}, "rollout_ids"),
        ({"options": {"emphasis": 2}}, "options.emphasis"),
    ],
)
def test_bad_bodies_name_the_field(client: httpx.Client, change: dict, field: str) -> None:
    answer = client.post("/v1/rubric/weights", json={**BODY, **change})
    assert answer.status_code == 422
    assert answer.json()["field"] == field


def test_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "groups.jsonl"
    bad = {**BODY, "scores": [[1]]}
    path.write_text(json.dumps(BODY) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    assert main(["rubric-weights", str(path)]) == 1  # the bad line
    out, err = capsys.readouterr()
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 1 and lines[0]["rollout_ids"] == ["a", "b", "c"]
    assert "line 2: scores" in err
