"""Redis goes away and comes back (a private redis-server, never the shared one): /readyz
says so, synchronous judging keeps working without the cache and says so, accepted jobs
resume and finish with exactly one result per rollout."""

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
from tests.harness.scripted.jobs import MODEL, add_sessions, sessions, worker_settings
from tests.redis_support import PrivateRedis, all_results, wait_job, wait_until

pytestmark = pytest.mark.redis

ROLLOUTS = 12
TEXT = "<think>\n17 × 24 = 418.\nSo the answer is 418.\n</think>\n\\boxed{418}"


@pytest.fixture
def provider() -> Iterator[FakeProviderServer]:
    with anthropic_server(delay_s=0.15) as fake:
        yield fake


def test_redis_down_then_back(
    provider: FakeProviderServer,
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    keys = [f"outage-{i}" for i in range(ROLLOUTS)]
    rollouts = add_sessions(provider, bpe, bpe_dir, keys)
    sync_rollout: dict[str, Any] = {
        "id": "sync",
        "problem": "What is 17 × 24?",
        "response_token_ids": bpe.hf.encode(TEXT, add_special_tokens=False),
        "reference_answer": "408",
    }
    with PrivateRedis(tmp_path) as private:
        settings = Settings(
            **worker_settings(provider, redis_url=private.url, redis_prefix="outage"),
            default_tokenizer=str(bpe_dir),
            worker_concurrency=2,
            jobs_max_deadline_s=10,
            jobs_reclaim_idle_s=12,
            inprocess_worker="on",
        )
        with (
            LiveServer(create_app(settings)) as live,
            httpx.Client(base_url=live.url, timeout=30) as client,
        ):
            assert client.get("/readyz").json()["checks"]["store"] == {"ok": True, "kind": "redis"}
            options = {"judge": MODEL, "deadline_s": 10}
            created = client.post("/v1/jobs", json={"rollouts": rollouts, "options": options})
            job_id = created.json()["id"]
            wait_until(
                lambda: client.get(f"/v1/jobs/{job_id}").json()["counts"]["done"] >= 2,
                30,
                "the job to be under way",
            )

            private.stop()

            ready = client.get("/readyz")
            assert ready.status_code == 503
            store = ready.json()["checks"]["store"]
            assert store["ok"] is False and "redis unavailable" in store["error"]
            judged = client.post("/v1/judge", json={"rollout": sync_rollout})
            assert judged.status_code == 200
            assert judged.json()["status"] == "ok" and judged.json()["cache"] == "unavailable"
            assert judged.json()["spans"]
            status = client.get(f"/v1/jobs/{job_id}")
            assert status.status_code == 503 and status.headers["retry-after"]
            refused = client.post("/v1/jobs", json={"rollouts": rollouts[:1]})
            assert refused.status_code == 503 and "store unavailable" in refused.json()["detail"]

            private.start()

            wait_until(lambda: client.get("/readyz").status_code == 200, 15, "ready again")
            view = wait_job(client, job_id, timeout=60)
            results = all_results(client, job_id)
            again = client.post("/v1/judge", json={"rollout": sync_rollout}).json()
            third = client.post("/v1/judge", json={"rollout": sync_rollout}).json()

    assert view["status"] == "done" and view["counts"]["done"] == ROLLOUTS
    assert [r["id"] for r in results] == keys
    assert all(r["status"] == "ok" and r["spans"] for r in results)
    # Nothing was judged twice: the outage was shorter than the reclaim time, and the
    # results judged during it were held by the worker until Redis took them.
    assert sessions(provider) == dict.fromkeys(keys, 1)
    # The result judged during the outage was not cached; the next one is, then reused.
    assert (again["cache"], third["cache"]) == ("miss", "hit")
