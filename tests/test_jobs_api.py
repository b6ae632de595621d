"""The jobs and judgments endpoints over real HTTP, with the in-process store and worker
(``serve`` without Redis) and with Redis: submit, poll, page in order, idempotency, cancel,
bad input naming its field."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from judge_service.api.app import create_app
from judge_service.config import Settings
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.conftest import LiveServer
from tests.harness.scripted import FakeProviderServer, anthropic_server
from tests.harness.scripted.jobs import MODEL, add_sessions, worker_settings
from tests.redis_support import all_results, drop_prefix, require_redis, unique_prefix, wait_job

WRONG = "<think>\n17 × 24 = 418.\nSo the answer is 418.\n</think>\n\\boxed{418}"
RIGHT = "<think>\n17 × 24 = 408.\nSo the answer is 408.\n</think>\n\\boxed{408}"


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProviderServer]:
    with anthropic_server(delay_s=0.1) as fake:
        yield fake


@pytest.fixture(scope="module", params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def server(
    request: pytest.FixtureRequest, bpe_dir: Path, provider: FakeProviderServer
) -> Iterator[str]:
    url = prefix = None
    extra: dict[str, Any] = {}
    if request.param == "redis":
        url, prefix = require_redis(), unique_prefix()
        extra = {"redis_url": url, "redis_prefix": prefix, "inprocess_worker": "on"}
    settings = Settings(
        **worker_settings(provider),
        default_tokenizer=str(bpe_dir),
        max_tokens_per_rollout=5000,
        max_rollouts_per_job=50,
        worker_concurrency=1,
        jobs_max_deadline_s=20,
        jobs_reclaim_idle_s=30,
        **extra,
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ANTHROPIC_API_KEY", "test-key")
        with LiveServer(create_app(settings)) as live:
            yield live.url
    if url and prefix:
        drop_prefix(url, prefix)


@pytest.fixture
def client(server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, timeout=30) as c:
        yield c


def _rollouts(bpe: LoadedTokenizer, n: int, tag: str) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{tag}-{i}",
            "group_id": "g",
            "problem": f"What is 17 × 24? ({tag} {i})",
            "response_token_ids": bpe.hf.encode(
                RIGHT if i % 2 else WRONG, add_special_tokens=False
            ),
            "reward": float(i % 2),
            "reference_answer": "408",
        }
        for i in range(n)
    ]


def test_a_job_is_judged_and_its_results_come_back_in_input_order(
    client: httpx.Client, bpe: LoadedTokenizer
) -> None:
    rollouts = _rollouts(bpe, 7, "order")
    rollouts[3]["response_token_ids"] = [10**9]  # outside the vocabulary: a failed result
    created = client.post("/v1/jobs", json={"rollouts": rollouts})
    assert created.status_code == 202, created.text
    job_id = created.json()["id"]
    assert created.json()["status"] in ("queued", "running", "done")

    view = wait_job(client, job_id, timeout=30)
    assert view["status"] == "done"
    assert view["counts"] == {
        "total": 7,
        "queued": 0,
        "running": 0,
        "done": 6,
        "failed": 1,
        "cancelled": 0,
        "dead_lettered": 0,
    }
    results = all_results(client, job_id, limit=3)
    assert [r["id"] for r in results] == [r["id"] for r in rollouts]
    assert results[3]["status"] == "failed" and "rollouts[3]" in results[3]["error"]
    judged = [r for i, r in enumerate(results) if i != 3]
    assert all(r["status"] == "ok" and len(r["credit"]) == r["num_tokens"] for r in judged)
    assert all("advantage" in r for r in judged)  # group + rewards: Dr. GRPO advantages
    # The same job's judgments are stored and readable by their cache key.
    stored = client.get(f"/v1/judgments/{results[0]['cache_key']}")
    assert stored.status_code == 200 and stored.json()["spans"] == results[0]["spans"]
    page = client.get(f"/v1/jobs/{job_id}/results", params={"cursor": "5", "limit": 10}).json()
    assert [r["id"] for r in page["results"]] == ["order-5", "order-6"]
    assert page["next_cursor"] is None


def test_the_same_idempotency_key_returns_the_same_job(
    client: httpx.Client, bpe: LoadedTokenizer
) -> None:
    body = {"rollouts": _rollouts(bpe, 2, "idem"), "idempotency_key": "step-17"}
    first = client.post("/v1/jobs", json=body)
    again = client.post("/v1/jobs", json=body)
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    changed = client.post("/v1/jobs", json={**body, "rollouts": _rollouts(bpe, 3, "idem")})
    assert changed.status_code == 409 and changed.json()["field"] == "idempotency_key"
    assert first.json()["id"] in changed.json()["detail"]
    wait_job(client, first.json()["id"], timeout=30)


def test_cancel_stops_what_has_not_started(
    client: httpx.Client, provider: FakeProviderServer, bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    keys = [f"cancel-{client.base_url.port}-{i}" for i in range(6)]
    rollouts = add_sessions(provider, bpe, bpe_dir, keys)
    options = {"judge": MODEL, "deadline_s": 10}
    job_id = client.post("/v1/jobs", json={"rollouts": rollouts, "options": options}).json()["id"]
    cancelled = client.delete(f"/v1/jobs/{job_id}")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    view = wait_job(client, job_id, timeout=30)
    counts = view["counts"]
    assert view["status"] == "cancelled" and counts["cancelled"] >= 4
    assert counts["done"] + counts["cancelled"] == 6
    results = all_results(client, job_id)
    assert [r["id"] for r in results] == keys
    for result in results:
        if result["status"] == "failed":
            assert result["error"].startswith("cancelled: ")
        else:
            assert result["status"] == "ok"
    # Cancelling a finished job changes nothing.
    assert client.delete(f"/v1/jobs/{job_id}").json()["counts"] == counts


@pytest.mark.parametrize(
    ("mutate", "status", "field"),
    [
        (
            lambda b: b["rollouts"][1].update(tokenizer="/no/such/tokenizer"),
            422,
            "rollouts[1].tokenizer",
        ),
        (
            lambda b: b["rollouts"][0].update(response_token_ids=[1] * 5001),
            413,
            "rollouts[0].response_token_ids",
        ),
        (lambda b: b.update(rollouts=b["rollouts"] * 26), 413, "rollouts"),
        (lambda b: b.update(rollouts=[]), 422, "rollouts"),
        (lambda b: b.update(options={"deadline_s": 60}), 422, "options.deadline_s"),
        (lambda b: b.update(options={"judge": "oracle"}), 422, "options.judge"),
        (lambda b: b.update(idempotency_key=""), 422, "idempotency_key"),
    ],
)
def test_bad_jobs_are_refused_naming_the_field(
    client: httpx.Client, bpe: LoadedTokenizer, mutate: Any, status: int, field: str
) -> None:
    body: dict[str, Any] = {"rollouts": _rollouts(bpe, 2, "bad")}
    mutate(body)
    response = client.post("/v1/jobs", json=body)
    assert response.status_code == status, response.text
    assert response.json()["field"] == field


def test_unknown_jobs_and_judgments_are_404_and_bad_cursors_422(
    client: httpx.Client, bpe: LoadedTokenizer
) -> None:
    assert client.get("/v1/jobs/job_nope").status_code == 404
    assert client.get("/v1/jobs/job_nope/results").json()["field"] == "id"
    assert client.delete("/v1/jobs/job_nope").status_code == 404
    missing = client.get("/v1/judgments/sha256:" + "0" * 64)
    assert missing.status_code == 404 and missing.json()["field"] == "key"
    assert client.get("/v1/judgments/not-a-key").json()["field"] == "key"
    job_id = client.post("/v1/jobs", json={"rollouts": _rollouts(bpe, 1, "cur")}).json()["id"]
    bad = client.get(f"/v1/jobs/{job_id}/results", params={"cursor": "x"})
    assert bad.status_code == 422 and bad.json()["field"] == "cursor"
    wait_job(client, job_id, timeout=30)


def test_sync_judging_uses_the_cache_unless_told_not_to(
    client: httpx.Client, bpe: LoadedTokenizer
) -> None:
    rollout = _rollouts(bpe, 1, f"sync-{client.base_url.port}")[0]
    first = client.post("/v1/judge", json={"rollout": rollout}).json()
    second = client.post("/v1/judge", json={"rollout": rollout}).json()
    fresh = client.post("/v1/judge", json={"rollout": rollout, "options": {"use_cache": False}})
    assert (first["cache"], second["cache"], fresh.json()["cache"]) == ("miss", "hit", "bypass")
    assert second["credit"] == first["credit"] == fresh.json()["credit"]
    spans = client.get(
        f"/v1/judgments/{first['cache_key']}", params={"credit_encoding": "spans"}
    ).json()
    assert spans["credit"] and all(set(run) == {"start", "end", "value"} for run in spans["credit"])


def test_job_operations_have_stable_ids(server: str) -> None:
    schema = httpx.get(server + "/openapi.json").json()
    ids = {op["operationId"] for path in schema["paths"].values() for op in path.values()}
    assert {"create_job", "get_job", "get_job_results", "cancel_job", "get_judgment"} <= ids
