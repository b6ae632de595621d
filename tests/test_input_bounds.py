"""Issue 10: every field of a request is bounded and well formed before work starts, and an
error never repeats unbounded input. Strings (lengths, lone surrogates), metadata, finite
rewards, groups whose rewards overflow; /v1/judge, /v1/judge/batch, /v1/credit and
/v1/jobs (with the in-process store and with Redis), over real HTTP."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from judge_service.api.app import create_app
from judge_service.config import Settings
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.conftest import LiveServer
from tests.redis_support import drop_prefix, require_redis, unique_prefix

TEXT = "<think>\n17 × 24 = 418.\nSo the answer is 418.\n</think>\n\\boxed{418}"
BIG = "x" * (2 * 1024 * 1024)


@pytest.fixture(scope="module")
def url(bpe_dir: Path) -> Iterator[str]:
    with LiveServer(create_app(Settings(default_tokenizer=str(bpe_dir)))) as live:
        yield live.url


@pytest.fixture(scope="module", params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def jobs_url(request: pytest.FixtureRequest, bpe_dir: Path) -> Iterator[str]:
    extra: dict[str, Any] = {"inprocess_worker": "off"}
    redis_url = prefix = None
    if request.param == "redis":
        redis_url, prefix = require_redis(), unique_prefix()
        extra |= {"redis_url": redis_url, "redis_prefix": prefix}
    with LiveServer(create_app(Settings(default_tokenizer=str(bpe_dir), **extra))) as live:
        yield live.url
    if redis_url and prefix:
        drop_prefix(redis_url, prefix)


def _rollout(bpe: LoadedTokenizer, **extra: Any) -> dict[str, Any]:
    ids = bpe.hf.encode(TEXT, add_special_tokens=False)
    return {"id": "r1", "problem": "What is 17 × 24?", "response_token_ids": ids, **extra}


def _post(url: str, body: dict[str, Any]) -> httpx.Response:
    # json.dumps writes a lone surrogate as the escape "\ud800" (valid JSON), which
    # httpx's own encoder would refuse to send; NaN and Infinity go out as their tokens.
    content = json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    return httpx.post(url, content=content, headers=headers, timeout=60)


def _refused(response: httpx.Response, field: str, status: int = 422) -> dict[str, Any]:
    assert response.status_code == status, response.text[:500]
    data: dict[str, Any] = response.json()
    assert data["field"] == field, data
    assert len(response.content) < 2_000  # never the input echoed back
    return data


@pytest.mark.parametrize(
    ("where", "field", "limit"),
    [
        ("problem", "rollout.problem", "65536"),
        ("reference_answer", "rollout.reference_answer", "65536"),
        ("reference_solution", "rollout.reference_solution", "65536"),
        ("final_answer", "rollout.final_answer", "65536"),
        ("tokenizer", "rollout.tokenizer", "512"),
        ("group_id", "rollout.group_id", "256"),
        ("id", "rollout.id", "256"),
    ],
)
def test_a_2mb_string_field_is_a_small_422_naming_it(
    url: str, bpe: LoadedTokenizer, where: str, field: str, limit: str
) -> None:
    data = _refused(_post(url + "/v1/judge", {"rollout": _rollout(bpe, **{where: BIG})}), field)
    assert limit in data["detail"]


def test_keys_metadata_and_options_are_bounded_and_never_echoed(
    url: str, bpe: LoadedTokenizer
) -> None:
    base = _rollout(bpe)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"rollout": {**base, BIG: 1}}, "rollout." + "x" * 63 + "…"),  # an unknown key
        ({"rollout": base, "options": {"label_scores": {BIG: 1.0}}}, "options.label_scores."),
        ({"rollout": {**base, "metadata": {"k": BIG}}}, "rollout.metadata"),
        ({"rollout": {**base, "metadata": {"k": [[[[[[[[[1]]]]]]]]]}}}, "rollout.metadata"),
        ({"rollout": base, "options": {"judge": BIG}}, "options.judge"),
    ]
    for body, field in cases:
        response = _post(url + "/v1/judge", body)
        assert response.status_code == 422 and len(response.content) < 2_000, response.text[:300]
        assert response.json()["field"].startswith(field)
    fine = {**base, "metadata": {"source": "gsm8k", "tags": ["a", "b"], "n": 3, "x": None}}
    assert _post(url + "/v1/judge", {"rollout": fine}).status_code == 200


@pytest.mark.parametrize(
    ("where", "field"),
    [
        ("problem", "rollout.problem"),
        ("tokenizer", "rollout.tokenizer"),
        ("reference_answer", "rollout.reference_answer"),
        ("group_id", "rollout.group_id"),
        ("id", "rollout.id"),
    ],
)
def test_a_lone_surrogate_is_a_422_never_a_500(
    url: str, bpe: LoadedTokenizer, where: str, field: str
) -> None:
    _refused(_post(url + "/v1/judge", {"rollout": _rollout(bpe, **{where: "a\ud800b"})}), field)


def test_surrogates_anywhere_else_are_a_422(url: str, bpe: LoadedTokenizer) -> None:
    base = _rollout(bpe)
    response = _post(url + "/v1/judge", {"rollout": {**base, "metadata": {"k": "\udfff"}}})
    _refused(response, "rollout.metadata")
    response = _post(
        url + "/v1/judge", {"rollout": base, "options": {"label_scores": {"\ud800": 1}}}
    )
    assert response.status_code == 422 and "label_scores" in response.json()["field"]
    response = _post(url + "/v1/judge/batch", {"rollouts": [base, {**base, "problem": "\ud83d"}]})
    _refused(response, "rollouts[1].problem")


def test_a_surrogate_in_a_job_is_a_422_not_a_500(jobs_url: str, bpe: LoadedTokenizer) -> None:
    """It used to pass validation and fail while the job was serialised for the queue."""
    body = {"rollouts": [_rollout(bpe), _rollout(bpe, id="r2", problem="bad \ud800")]}
    _refused(_post(jobs_url + "/v1/jobs", body), "rollouts[1].problem")
    keyed = {"rollouts": [_rollout(bpe)], "idempotency_key": "k\udc00"}
    _refused(_post(jobs_url + "/v1/jobs", keyed), "idempotency_key")
    assert _post(jobs_url + "/v1/jobs", {"rollouts": [_rollout(bpe)]}).status_code == 202


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_rewards_must_be_finite(url: str, bpe: LoadedTokenizer, token: str) -> None:
    """Python's json reads these (1e400 as inf); each made a group's advantages null."""
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("/v1/judge", {"rollout": _rollout(bpe, reward=R)}, "rollout.reward"),
        (
            "/v1/judge",
            {"rollout": _rollout(bpe, reward=1.0), "group_rewards": [1.0, R]},
            "group_rewards[1]",
        ),
        ("/v1/judge/batch", {"rollouts": [_rollout(bpe, reward=R)]}, "rollouts[0].reward"),
        ("/v1/jobs", {"rollouts": [_rollout(bpe, reward=R)]}, "rollouts[0].reward"),
        ("/v1/credit", {"num_tokens": 1, "spans": [], "reward": R}, "reward"),
        (
            "/v1/credit",
            {"num_tokens": 1, "spans": [], "reward": 1.0, "group_rewards": [R]},
            "group_rewards[0]",
        ),
    ]
    for path, body, field in cases:
        content = json.dumps(body).replace(json.dumps(R), token)
        response = httpx.post(
            url + path, content=content, headers={"content-type": "application/json"}
        )
        assert token in content
        _refused(response, field)


R = "__reward__"  # stands for the token in a body written with json.dumps


def test_overflowing_group_rewards_are_a_422(url: str, bpe: LoadedTokenizer) -> None:
    """[1e308, 1e308] has an infinite mean: the advantages were null for the whole group."""
    judge = {"rollout": _rollout(bpe, reward=1e308), "group_rewards": [1e308, 1e308]}
    data = _refused(_post(url + "/v1/judge", judge), "group_rewards")
    assert "overflow" in data["detail"]
    credit = {"num_tokens": 2, "spans": [], "reward": 1e308, "group_rewards": [1e308, 1e308]}
    _refused(_post(url + "/v1/credit", credit), "group_rewards")
    # A reward far from its group's mean: its own advantage overflows.
    apart = {"rollout": _rollout(bpe, reward=-1e39), "group_rewards": [0.0, 1.0]}
    _refused(_post(url + "/v1/judge", apart), "rollout.reward")
    # Finite in float64 but not in float32 (base64-f32): refused too, never an inf.
    wide = {"num_tokens": 2, "spans": [], "reward": 1e300, "group_rewards": [1e300, 0.0]}
    _refused(_post(url + "/v1/credit", wide), "group_rewards")


def test_a_batch_fails_only_the_rollouts_of_an_overflowing_group(
    url: str, bpe: LoadedTokenizer
) -> None:
    rollouts = [
        _rollout(bpe, id="h1", group_id="huge", reward=1e308),
        _rollout(bpe, id="f1", group_id="fine", reward=0.0),
        _rollout(bpe, id="h2", group_id="huge", reward=1e308),
        _rollout(bpe, id="f2", group_id="fine", reward=1.0),
        _rollout(bpe, id="solo"),
    ]
    for encoding in ("dense", "base64-f32", "spans"):
        body = {"rollouts": rollouts, "options": {"credit_encoding": encoding}}
        response = _post(url + "/v1/judge/batch", body)
        assert response.status_code == 200, response.text[:300]
        data = response.json()
        statuses = {r["id"]: r["status"] for r in data["results"]}
        assert statuses == {"h1": "failed", "f1": "ok", "h2": "failed", "f2": "ok", "solo": "ok"}
        errors = {r["id"]: r.get("error", "") for r in data["results"]}
        assert errors["h1"].startswith("rollouts[0].reward: ") and "overflow" in errors["h1"]
        assert errors["h2"].startswith("rollouts[2].reward: ")
        assert data["stats"]["counts"] == {"ok": 3, "fallback": 0, "failed": 2}
        assert "null" not in response.text and "NaN" not in response.text
    dense = _post(url + "/v1/judge/batch", {"rollouts": rollouts}).json()["results"]
    assert all(math.isfinite(v) for r in dense if "advantage" in r for v in r["advantage"])
    # A job is checked when submitted: the whole request is refused, naming the reward.
    _refused(_post(url + "/v1/jobs", {"rollouts": rollouts}), "rollouts[0].reward")


def test_group_advantages_fail_only_the_overflowing_group() -> None:
    from judge_service import credit
    from judge_service.errors import InputError

    rewards = [1e308, 0.0, 1e308, 1.0, 5.0]
    advantages = credit.group_advantages(rewards, ["h", "f", "h", "f", None])
    assert advantages[4] is None
    fine = [a for a in (advantages[1], advantages[3]) if a is not None]
    assert [a.value for a in fine] == [-0.5, 0.5] and fine[0].group_scale == 0.5
    huge = advantages[2]
    assert huge is not None
    with pytest.raises(InputError) as caught:
        huge.check()
    assert caught.value.field == "rollouts[2].reward"
    with pytest.raises(InputError):
        _ = huge.value  # what a rollout's credit reads: the failure reaches that rollout only
    named = credit.group_advantages([1e308, 1e308], ["h", "h"], ["line 3.reward", "line 9.reward"])
    assert named[1] is not None and named[1].invalid is not None
    assert named[1].invalid.field == "line 9.reward"
    # Bounded rewards that stay finite in float32 are untouched.
    assert credit.advantage_in_group(1e37, [1e37, -1e37], reward_field="r") is not None


def test_metadata_budget_stops_early() -> None:
    from judge_service.bounds import MAX_METADATA_CHARS, bounded_json

    assert bounded_json({"a": [1, 2.5, True, None, "x" * 1000]})
    for bad in (
        {"a": "x" * MAX_METADATA_CHARS},
        {"a": list(range(MAX_METADATA_CHARS))},
        {"a": 10**70_000},  # counted by its digits, without writing them out
        {"a": [float("nan")]},
    ):
        with pytest.raises(ValueError):
            bounded_json(bad)
