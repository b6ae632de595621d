"""The HTTP API over real HTTP: a uvicorn server in a thread, an httpx client."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import numpy as np
import pytest

from judge_service.api.app import create_app
from judge_service.config import Settings
from tests.conftest import LiveServer


@pytest.fixture(scope="module")
def server(bpe_dir: Path) -> Iterator[str]:
    settings = Settings(
        default_tokenizer=str(bpe_dir),
        max_tokens_per_rollout=5000,
        max_rollouts_per_batch=20,
        max_body_bytes=200_000,
    )
    with LiveServer(create_app(settings)) as live:
        yield live.url


@pytest.fixture
def client(server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, timeout=30) as c:
        yield c


def _rollout(bpe: Any, text: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": "r1",
        "problem": "What is 17 × 24?",
        "response_token_ids": bpe.hf.encode(text, add_special_tokens=False),
        **extra,
    }


WRONG = "<think>\n17 × 24 = 418.\nSo the answer is 418.\n</think>\n\\boxed{418}"


def test_health_and_ready(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True


def test_judge_one_rollout(client: httpx.Client, bpe: Any) -> None:
    body = {"rollout": _rollout(bpe, WRONG, reference_answer="408", reward=0.0)}
    response = client.post("/v1/judge", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] == "ok" and result["num_tokens"] == len(
        body["rollout"]["response_token_ids"]
    )
    labels = {s["label"] for s in result["spans"]}
    assert "invalid" in labels
    assert len(result["credit"]) == result["num_tokens"]
    assert result["judge"]["name"] == "rules" and result["cache_key"].startswith("sha256:")
    assert min(result["credit"]) < 0


def test_group_rewards_give_advantages(client: httpx.Client, bpe: Any) -> None:
    body = {
        "rollout": _rollout(bpe, WRONG, reward=0.0, reference_answer="408"),
        "group_rewards": [0.0, 1.0, 1.0, 1.0],
    }
    result = client.post("/v1/judge", json=body).json()
    credit = np.array(result["credit"])
    np.testing.assert_allclose(np.array(result["advantage"]), credit - 0.75)


@pytest.mark.parametrize(
    ("mutate", "status", "field"),
    [
        (lambda r: r.pop("response_token_ids"), 422, "rollout.response_token_ids"),
        (
            lambda r: r.update(response_token_ids=[1, 2, 10**6]),
            422,
            "rollout.response_token_ids[2]",
        ),
        (lambda r: r.update(response_token_ids=["a"]), 422, "rollout.response_token_ids[0]"),
        (lambda r: r.update(tokenizer="/nonexistent/tok"), 422, "rollout.tokenizer"),
        (lambda r: r.update(response_token_ids=[5] * 5001), 413, "rollout.response_token_ids"),
        (lambda r: r.update(surprise=1), 422, "rollout.surprise"),
    ],
)
def test_bad_input_names_the_field(
    client: httpx.Client, bpe: Any, mutate: Any, status: int, field: str
) -> None:
    rollout = _rollout(bpe, WRONG)
    mutate(rollout)
    response = client.post("/v1/judge", json={"rollout": rollout})
    assert response.status_code == status, response.text
    assert response.json()["field"] == field
    assert field in response.json()["detail"]


def test_bad_options_name_the_field(client: httpx.Client, bpe: Any) -> None:
    for options, field in [
        ({"judge": "oracle"}, "options.judge"),
        ({"lambda": -1}, "options.lambda"),
        ({"credit_encoding": "csv"}, "options.credit_encoding"),
        ({"min_confidence": 2}, "options.min_confidence"),
    ]:
        response = client.post(
            "/v1/judge", json={"rollout": _rollout(bpe, WRONG), "options": options}
        )
        assert response.status_code == 422, response.text
        assert response.json()["field"] == field


def test_body_size_limit(client: httpx.Client, bpe: Any) -> None:
    rollout = _rollout(bpe, WRONG, problem="x" * 300_000)
    response = client.post("/v1/judge", json={"rollout": rollout})
    assert response.status_code == 413 and response.json()["field"] == "body"


def test_batch_isolates_a_failing_rollout(client: httpx.Client, bpe: Any) -> None:
    good = _rollout(bpe, WRONG, reward=0.0, group_id="g", reference_answer="408")
    right = _rollout(
        bpe, "17 × 24 = 408.\n\\boxed{408}", reward=1.0, group_id="g", reference_answer="408"
    )
    right["id"] = "r2"
    bad = _rollout(bpe, WRONG, id="r3", response_token_ids=[1, 10**7])
    response = client.post("/v1/judge/batch", json={"rollouts": [good, bad, right]})
    assert response.status_code == 200, response.text
    data = response.json()
    assert [r["id"] for r in data["results"]] == ["r1", "r3", "r2"]
    assert [r["status"] for r in data["results"]] == ["ok", "failed", "ok"]
    assert "response_token_ids[1]" in data["results"][1]["error"]
    assert data["stats"]["counts"] == {"ok": 2, "fallback": 0, "failed": 1}
    first = data["results"][0]
    np.testing.assert_allclose(np.array(first["advantage"]) - np.array(first["credit"]), -0.5)
    assert 0 < data["stats"]["judge_share"] < 1


def test_batch_limit(client: httpx.Client, bpe: Any) -> None:
    rollouts = [_rollout(bpe, "1 + 1 = 2", id=f"r{i}") for i in range(21)]
    response = client.post("/v1/judge/batch", json={"rollouts": rollouts})
    assert response.status_code == 413 and response.json()["field"] == "rollouts"


def test_credit_encodings_over_http(client: httpx.Client, bpe: Any) -> None:
    dense = client.post(
        "/v1/judge", json={"rollout": _rollout(bpe, WRONG, reference_answer="408")}
    ).json()
    packed = client.post(
        "/v1/judge",
        json={
            "rollout": _rollout(bpe, WRONG, reference_answer="408"),
            "options": {"credit_encoding": "base64-f32"},
        },
    ).json()
    decoded = np.frombuffer(base64.b64decode(packed["credit"]), "<f4")
    np.testing.assert_allclose(decoded, dense["credit"], rtol=1e-6)


def test_credit_endpoint(client: httpx.Client) -> None:
    body = {
        "num_tokens": 8,
        "spans": [
            {"start": 0, "end": 4, "label": "invalid", "confidence": 0.9},
            {"start": 2, "end": 6, "label": "valid_progress", "confidence": 0.5},
            {"start": 6, "end": 9, "label": "neutral"},
        ],
        "options": {"lambda": 1.0, "kappa": 10.0, "credit_encoding": "spans"},
        "reward": 1.0,
        "group_rewards": [1.0, 0.0],
    }
    data = client.post("/v1/credit", json=body).json()
    assert data["credit"] == [{"start": 0, "end": 4, "value": -1.0}]
    assert sorted(r["code"] for r in data["rejected_spans"]) == ["out_of_range", "overlap"]
    reasons = " ".join(r["reason"] for r in data["rejected_spans"])
    assert "overlaps" in reasons and "need 0 <= start < end <= 8" in reasons
    assert data["advantage"][0] == {"start": 0, "end": 4, "value": -0.5}


def test_metrics_count_results(client: httpx.Client, bpe: Any) -> None:
    def ok_count() -> float:
        text = client.get("/metrics").text
        for line in text.splitlines():
            if line.startswith('judge_results_total{judge="rules",status="ok"}'):
                return float(line.split()[-1])
        return 0.0

    before = ok_count()
    body = {"rollout": _rollout(bpe, WRONG, reference_answer="408")}
    assert client.post("/v1/judge", json=body).status_code == 200
    assert ok_count() == before + 1
    assert "judge_rollout_latency_seconds_bucket" in client.get("/metrics").text


def test_a_stored_judgment_and_its_html_view(client: httpx.Client, bpe: Any) -> None:
    text = "17 × 24 = 418.\nSo the total is 418 <script>x</script>.\n\\boxed{418}"
    result = client.post(
        "/v1/judge", json={"rollout": _rollout(bpe, text, reference_answer="408")}
    ).json()
    key = result["cache_key"]
    stored = client.get(f"/v1/judgments/{key}").json()
    assert stored["spans"] == result["spans"] and stored["credit"] == result["credit"]
    page = client.get(f"/v1/judgments/{key}/view")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert "418 &lt;script&gt;x&lt;/script&gt;" in html and "<script" not in html
    assert "invalid" in html and "<rect" in html
    assert client.get("/v1/judgments/sha256:" + "0" * 64 + "/view").status_code == 404
    assert client.get("/v1/judgments/nope/view").json()["field"] == "key"


def test_group_rewards_without_a_reward_names_the_field(client: httpx.Client, bpe: Any) -> None:
    response = client.post(
        "/v1/judge", json={"rollout": _rollout(bpe, WRONG), "group_rewards": [1.0, 0.0]}
    )
    assert response.status_code == 422 and response.json()["field"] == "rollout.reward"
    empty = client.post(
        "/v1/credit", json={"num_tokens": 3, "spans": [], "reward": 1.0, "group_rewards": []}
    )
    assert empty.status_code == 422 and empty.json()["field"] == "group_rewards"


def test_a_small_request_resolves_no_dependency_in_the_thread_pool(bpe: Any) -> None:
    """FastAPI runs a plain ``def`` dependency in its thread pool: a thread hop per
    dependency per request, about a tenth of a small request's time (BENCHMARKS.md "End to
    end"). The dependencies are ``async def``, so judging one small rollout sends nothing
    there."""
    import asyncio

    from fastapi.dependencies import utils

    app = create_app(Settings(default_tokenizer=str(bpe.name)))
    ids = bpe.hf.encode("17 × 24 = 408.\n\\boxed{408}", add_special_tokens=False)
    body = {"rollout": {"id": "r", "response_token_ids": ids}, "options": {"use_cache": False}}

    async def judge() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://test") as client,
        ):
            return await client.post("/v1/judge", json=body)

    with mock.patch.object(utils, "run_in_threadpool", wraps=utils.run_in_threadpool) as spy:
        response = asyncio.run(judge())
    assert response.status_code == 200 and response.json()["status"] == "ok"
    assert spy.call_count == 0


def test_a_default_judge_that_cannot_be_built_makes_the_server_not_ready() -> None:
    """No judge runs short of a tool it was configured with: a tool the server cannot give
    is a readiness failure naming it, not a judge quietly without it."""
    settings = Settings(
        default_judge="openai:some-model",
        allowed_judges=["openai:*"],
        llm_tools=["view_tokens", "run_python", "no_such_tool"],
    )
    with LiveServer(create_app(settings)) as live:
        ready = httpx.get(live.url + "/readyz", timeout=10)
    assert ready.status_code == 503 and ready.json()["ready"] is False
    judge = ready.json()["checks"]["judge"]
    assert judge["ok"] is False and "no_such_tool" in judge["error"]
