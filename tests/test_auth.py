"""Bearer auth over real HTTP: missing and wrong keys, tenants that cannot see each other's
jobs and judgments, the per-key request limit (shared through Redis), the open mode."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from judge_service.api.app import create_app
from judge_service.api.auth import matching_key, tenant_of
from judge_service.config import Settings
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.conftest import LiveServer
from tests.redis_support import drop_prefix, require_redis, unique_prefix, wait_job

ALPHA, BETA = "alpha-secret-key-0001", "beta-secret-key-0002"
TEXT = "<think>\n17 × 24 = 408.\n</think>\n\\boxed{408}"


@pytest.fixture(scope="module")
def server(bpe_dir: Path) -> Iterator[str]:
    url, prefix = require_redis(), unique_prefix()
    settings = Settings(
        default_tokenizer=str(bpe_dir),
        api_keys=f"{ALPHA},{BETA}",  # type: ignore[arg-type]  # CSV, as in the environment
        redis_url=url,
        redis_prefix=prefix,
        inprocess_worker="on",
        api_rate_limit_rpm=60,
        api_rate_limit_burst=8,
    )
    with LiveServer(create_app(settings)) as live:
        yield live.url
    drop_prefix(url, prefix)


def _client(url: str, key: str | None) -> httpx.Client:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=url, headers=headers, timeout=30)


def _rollout(bpe: LoadedTokenizer) -> dict[str, Any]:
    ids = bpe.hf.encode(TEXT, add_special_tokens=False)
    return {"id": "r", "problem": "17 × 24?", "response_token_ids": ids}


@pytest.mark.redis
def test_missing_and_wrong_keys_are_401(server: str, bpe: LoadedTokenizer) -> None:
    body = {"rollout": _rollout(bpe)}
    for key in (None, "wrong-key", ALPHA + "x", ALPHA[:-1]):
        with _client(server, key) as client:
            response = client.post("/v1/judge", json=body)
            assert response.status_code == 401, key
            assert response.headers["www-authenticate"] == "Bearer"
            assert response.json()["field"] == "authorization"
            assert client.get("/v1/jobs/job_x").status_code == 401
    with httpx.Client(base_url=server, headers={"authorization": f"Basic {ALPHA}"}) as client:
        assert "missing bearer token" in client.post("/v1/credit", json={}).json()["detail"]
    # Health probes need no key.
    with _client(server, None) as client:
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200


@pytest.mark.redis
def test_a_key_sees_only_its_own_jobs_and_judgments(server: str, bpe: LoadedTokenizer) -> None:
    with _client(server, ALPHA) as alpha, _client(server, BETA) as beta:
        judged = alpha.post("/v1/judge", json={"rollout": _rollout(bpe)})
        assert judged.status_code == 200 and judged.json()["cache"] == "miss"
        key = judged.json()["cache_key"]
        job = alpha.post("/v1/jobs", json={"rollouts": [_rollout(bpe)], "idempotency_key": "k"})
        assert job.status_code == 202
        job_id = job.json()["id"]
        wait_job(alpha, job_id, timeout=30)
        assert alpha.get(f"/v1/judgments/{key}").status_code == 200

        for path in (f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/results", f"/v1/judgments/{key}"):
            response = beta.get(path)
            assert response.status_code == 404, path  # the same answer as "does not exist"
        assert beta.delete(f"/v1/jobs/{job_id}").status_code == 404
        # Beta's identical request is judged for beta (no cross-tenant cache hit), and the
        # same idempotency key is beta's own.
        assert beta.post("/v1/judge", json={"rollout": _rollout(bpe)}).json()["cache"] == "miss"
        other = beta.post("/v1/jobs", json={"rollouts": [_rollout(bpe)], "idempotency_key": "k"})
        assert other.status_code == 202 and other.json()["id"] != job_id
        wait_job(beta, other.json()["id"], timeout=30)


@pytest.fixture(scope="module")
def limited_server(bpe_dir: Path) -> Iterator[str]:
    # Its own server and a slow refill (one request per 10 s), so neither the other
    # tests' requests nor a slow machine can change what the bucket holds.
    url, prefix = require_redis(), unique_prefix()
    settings = Settings(
        default_tokenizer=str(bpe_dir),
        api_keys=f"{ALPHA},{BETA}",  # type: ignore[arg-type]
        redis_url=url,
        redis_prefix=prefix,
        inprocess_worker="off",
        api_rate_limit_rpm=6,
        api_rate_limit_burst=8,
    )
    with LiveServer(create_app(settings)) as live:
        yield live.url
    drop_prefix(url, prefix)


@pytest.mark.redis
def test_the_per_key_limit_answers_429_with_retry_after(limited_server: str) -> None:
    server = limited_server
    with _client(server, ALPHA) as alpha, _client(server, BETA) as beta:
        codes = [alpha.get("/v1/jobs/job_none").status_code for _ in range(12)]
        assert codes[:8] == [404] * 8 and codes[8:] == [429] * 4
        limited = alpha.get("/v1/jobs/job_none")
        assert limited.status_code == 429
        assert int(limited.headers["retry-after"]) >= 1
        assert "6 requests per minute" in limited.json()["detail"]
        # Another key has its own bucket.
        assert beta.get("/v1/jobs/job_none").status_code == 404


def test_keys_match_in_constant_time_on_hashes() -> None:
    keys = [ALPHA, BETA]
    assert matching_key(BETA, keys) == BETA
    assert matching_key("", keys) is None and matching_key(BETA + " ", keys) is None
    assert tenant_of(ALPHA) != tenant_of(BETA) and ALPHA not in tenant_of(ALPHA)


def test_an_open_api_warns_at_start_up(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING), LiveServer(create_app(Settings())) as live:
        assert httpx.get(live.url + "/v1/jobs/job_x").status_code == 404  # no key needed
    assert "JUDGE_API_KEYS is unset" in caplog.text


def test_the_engine_dependency_does_not_walk_authenticate_again() -> None:
    """The engine's dependency reads the tenant `authenticate` found (a router dependency,
    resolved first) instead of declaring it again: FastAPI walked a repeated dependency,
    and its bearer scheme, on every request even when its value was cached."""
    from fastapi.dependencies.models import Dependant
    from fastapi.dependencies.utils import get_dependant

    from judge_service.api.auth import authenticate
    from judge_service.api.deps import get_engine

    def calls(dependant: Dependant) -> list[object]:
        return [dependant.call, *(c for d in dependant.dependencies for c in calls(d))]

    assert authenticate not in calls(get_dependant(path="/", call=get_engine))


def test_the_engine_acts_for_the_authenticated_tenant(bpe: LoadedTokenizer) -> None:
    """A judgment cached by one key is not served to the other (each engine view carries
    its caller's tenant), and the open mode judges as before."""
    body = {"rollout": {"id": "t", "problem": "p", "response_token_ids": bpe.hf.encode(TEXT)}}
    settings = Settings(default_tokenizer=str(bpe.name), api_keys=f"{ALPHA},{BETA}")  # type: ignore[arg-type]
    with LiveServer(create_app(settings)) as live, httpx.Client(base_url=live.url) as client:
        first = client.post("/v1/judge", json=body, headers={"authorization": f"Bearer {ALPHA}"})
        again = client.post("/v1/judge", json=body, headers={"authorization": f"Bearer {ALPHA}"})
        other = client.post("/v1/judge", json=body, headers={"authorization": f"Bearer {BETA}"})
    assert first.status_code == again.status_code == other.status_code == 200, first.text
    assert [r.json()["cache"] for r in (first, again, other)] == ["miss", "hit", "miss"]
