"""POST /v1/judge/group over real HTTP (a uvicorn server in a thread), the rules judge:
divergence credit on constructed groups, the zero-sum scores of an equal-reward group,
identical rollouts judged once, and bad groups refused naming the field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from judge_service.api.app import create_app
from judge_service.client import AsyncJudgeClient, InvalidRequestError, JudgeClient
from judge_service.config import Settings
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.conftest import LiveServer

PROBLEM = "What is 17 × 24?"
SHARED = ["We need 17 × 24.", "Split 24 into 20 + 4.", "17 × 20 = 340."]
RIGHT = [*SHARED, "17 × 4 = 68.", "340 + 68 = 408.", "So the answer is \\boxed{408}."]
FALSE_AT_3 = [*SHARED, "17 × 4 = 78.", "340 + 78 = 418.", "So the answer is \\boxed{418}."]
WRONG_PLAN = [
    *SHARED[:2],
    "Only the 20 matters, so take 17 × 20 = 340 alone.",
    "So the answer is \\boxed{340}.",
]
# Right in the end, with an arithmetic slip it repairs: worse than RIGHT by its credit.
REPAIRED = [*SHARED, "17 × 4 = 78.", "No: 17 × 4 = 68.", "340 + 68 = 408.", "\\boxed{408}"]


@pytest.fixture(scope="module")
def server(bpe_dir: Path) -> Iterator[str]:
    settings = Settings(default_tokenizer=str(bpe_dir), max_group_size=6, max_tokens_per_group=600)
    with LiveServer(create_app(settings)) as live:
        yield live.url


@pytest.fixture
def client(server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, timeout=60) as c:
        yield c


def rollout(bpe: LoadedTokenizer, rid: str, lines: list[str], reward: float) -> dict[str, Any]:
    ids = bpe.hf.encode("\n".join(lines), add_special_tokens=False)
    return {
        "id": rid,
        "group_id": "g",
        "problem": PROBLEM,
        "response_token_ids": ids,
        "reference_answer": "408",
        "reward": reward,
    }


def post(client: httpx.Client, rollouts: list[dict[str, Any]], **options: Any) -> httpx.Response:
    return client.post("/v1/judge/group", json={"rollouts": rollouts, "options": options})


def test_a_wrong_copy_gets_its_negative_credit_on_the_line_it_departs(
    client: httpx.Client, bpe: LoadedTokenizer
) -> None:
    group = [
        rollout(bpe, "right", RIGHT, 1.0),
        rollout(bpe, "false", FALSE_AT_3, 0.0),
        rollout(bpe, "plan", WRONG_PLAN, 0.0),
    ]
    response = post(client, group)
    assert response.status_code == 200, response.text
    body = response.json()
    results, block = body["results"], body["group"]
    assert [r["id"] for r in results] == ["right", "false", "plan"]
    assert [r["status"] for r in results] == ["ok"] * 3
    assert block["correct"] == [True, False, False]
    assert block["equal_reward"] is False and "scores" not in block
    points = {p["rollout"]: p for p in block["divergence"]}
    assert set(points) == {1, 2}
    assert (points[1]["reason"], points[1]["label"]) == ("checker_false", "invalid")
    assert (points[2]["reason"], points[2]["label"]) == ("leads_to_wrong_answer", "invalid")
    assert all(p["sibling"] == 0 for p in points.values())
    # The plan's departure is no arithmetic: the rules judge alone leaves it uncovered,
    # so the point is its credit: negative on exactly that step's tokens, none before it.
    plan = points[2]
    assert plan["applied"] is True
    credit = np.asarray(results[2]["credit"])
    assert (credit[plan["start"] : plan["end"]] < 0).all()
    assert not (credit[: plan["start"]] < 0).any()
    spans = [(s["start"], s["end"], s["label"]) for s in results[2]["spans"]]
    assert (plan["start"], plan["end"], "invalid") in spans
    # The same rollouts judged one by one: no negative span on the plan's departure (its
    # arithmetic is true; only the group shows that 340 is no answer).
    alone = client.post(
        "/v1/judge/batch", json={"rollouts": [{**group[2], "group_id": None}]}
    ).json()["results"][0]
    negative = {"invalid", "unsupported", "unproductive_repetition"}
    assert not any(
        s["start"] < plan["end"] and plan["start"] < s["end"] and s["label"] in negative
        for s in alone["spans"]
    )
    # The false line: the rules judge itself marks its claim invalid; the divergence span
    # stands back (the judge's span stands, spans never overlap), and nothing before the
    # line is negative.
    false_point, false_credit = points[1], np.asarray(results[1]["credit"])
    assert false_point["applied"] is False
    assert (false_credit[false_point["start"] : false_point["end"]] < 0).any()
    assert not (false_credit[: false_point["start"]] < 0).any()
    # Dr. GRPO advantages over the group ride along as in a batch.
    mean = 1 / 3
    assert np.allclose(
        np.asarray(results[0]["advantage"]) - np.asarray(results[0]["credit"]), 1 - mean
    )


def test_an_equal_reward_group_gets_zero_sum_scores(
    client: httpx.Client, bpe: LoadedTokenizer
) -> None:
    group = [
        rollout(bpe, "repaired", REPAIRED, 1.0),
        rollout(bpe, "right", RIGHT, 1.0),
        rollout(bpe, "right-2", RIGHT, 1.0),
    ]
    lam, kappa = 0.25, 0.2
    response = post(client, group, **{"lambda": lam, "kappa": kappa})
    assert response.status_code == 200, response.text
    body = response.json()
    block, results = body["group"], body["results"]
    assert block["equal_reward"] is True
    # The copy is judged once and shares its original's judgment.
    assert block["same_as"] == [None, None, 1]
    assert results[2]["id"] == "right-2" and results[2]["spans"] == results[1]["spans"]
    assert body["stats"]["counts"] == {"ok": 3, "fallback": 0, "failed": 0}
    scores = block["scores"]
    assert abs(sum(scores)) < 1e-9 and all(-1 <= s <= 1 for s in scores)
    # Two clean rollouts tie above the repaired one.
    assert block["ranking"] == [[1, 2], [0]]
    assert scores[1] == scores[2] > 0 > scores[0]
    # The scores are in the credit, under the κ cap; advantage = credit (A_i = 0).
    for result in results:
        credit = np.asarray(result["credit"])
        assert float(np.abs(credit).mean()) <= kappa + 1e-9
        assert np.allclose(np.asarray(result["advantage"]), credit)
    assert float(np.asarray(results[1]["credit"]).mean()) > 0
    assert float(np.asarray(results[0]["credit"]).mean()) < float(
        np.asarray(results[1]["credit"]).mean()
    )


def test_only_truly_identical_rollouts_share_a_judgment(
    client: httpx.Client, bpe: LoadedTokenizer
) -> None:
    # The same ids with another stated final answer is another rollout to judge.
    right = rollout(bpe, "a", RIGHT, 1.0)
    group = [right, {**right, "id": "b"}, {**right, "id": "c", "final_answer": "407"}]
    response = post(client, group)
    assert response.status_code == 200, response.text
    assert response.json()["group"]["same_as"] == [None, 0, None]


def test_one_failing_rollout_fails_alone(client: httpx.Client, bpe: LoadedTokenizer) -> None:
    bad = {**rollout(bpe, "bad", RIGHT, 1.0), "response_token_ids": [10**9]}
    group = [rollout(bpe, "right", RIGHT, 1.0), bad, rollout(bpe, "f", FALSE_AT_3, 0.0)]
    response = post(client, group)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["ok", "failed", "ok"]
    assert "rollouts[1].response_token_ids" in results[1]["error"]
    assert response.json()["group"]["correct"] == [True, None, False]


@pytest.mark.parametrize(
    ("change", "status", "field"),
    [
        ({"problem": "What is 17 × 25?"}, 422, "rollouts[1].problem"),
        ({"reference_answer": "425"}, 422, "rollouts[1].reference_answer"),
        ({"group_id": "other"}, 422, "rollouts[1].group_id"),
    ],
)
def test_a_group_of_different_prompts_is_refused_naming_the_rollout(
    client: httpx.Client, bpe: LoadedTokenizer, change: dict[str, Any], status: int, field: str
) -> None:
    group = [rollout(bpe, "a", RIGHT, 1.0), {**rollout(bpe, "b", RIGHT, 1.0), **change}]
    response = post(client, group)
    assert response.status_code == status, response.text
    assert response.json()["field"] == field


def test_limits_are_413s_that_say_which(client: httpx.Client, bpe: LoadedTokenizer) -> None:
    seven = [rollout(bpe, f"r{i}", RIGHT[:1], 1.0) for i in range(7)]
    too_many = post(client, seven)
    assert too_many.status_code == 413
    assert "JUDGE_MAX_GROUP_SIZE" in too_many.json()["detail"]
    long = ["17 × 4 = 68."] * 40
    too_long = post(client, [rollout(bpe, f"r{i}", long, 1.0) for i in range(3)])
    assert too_long.status_code == 413
    assert "JUDGE_MAX_TOKENS_PER_GROUP" in too_long.json()["detail"]
    one = post(client, seven[:1])
    assert one.status_code == 422 and one.json()["field"].startswith("rollouts")


async def test_the_clients_judge_a_group(server: str, bpe: LoadedTokenizer) -> None:
    group = [rollout(bpe, "right", RIGHT, 1.0), rollout(bpe, "false", FALSE_AT_3, 0.0)]
    with JudgeClient(server) as client:
        answer = client.judge_group(group, {"credit_encoding": "base64-f32"})
        with pytest.raises(InvalidRequestError) as refused:
            client.judge_group([group[0], {**group[1], "problem": "another"}])
    assert [r.id for r in answer.results] == ["right", "false"]
    assert [p.rollout for p in answer.group.divergence] == [1]
    assert refused.value.field == "rollouts[1].problem"
    async with AsyncJudgeClient(server) as client:
        again = await client.judge_group(group)
    assert again.group == answer.group
