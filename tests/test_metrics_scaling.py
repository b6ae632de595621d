"""The figures autoscalers and alerts read from /metrics: the queue as KEDA's redis-streams
scaler sees it (the group's lag and pending count), the oldest waiting rollout, and the
judge sessions in flight per provider. Read from a real Redis and a real judge session."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from judge_service.api.app import create_app
from judge_service.config import Settings
from judge_service.jobs.queue import RedisJobStore
from judge_service.store.redis_store import RedisStore
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.conftest import EXAMPLES, LiveServer
from tests.harness.scripted import FakeProviderServer, anthropic_server
from tests.harness.scripted.jobs import MODEL, add_sessions, worker_settings
from tests.redis_support import shared_redis, wait_until

Figures = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _scrape(client: httpx.Client) -> Figures:
    text = client.get("/metrics").text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


GROUP = (("group", "judges"),)


@pytest.mark.redis
def test_an_api_without_workers_reports_the_queue_as_keda_reads_it(
    example_rollouts: list[dict[str, Any]],
) -> None:
    with shared_redis() as (url, prefix):
        settings = Settings(
            redis_url=url,
            redis_prefix=prefix,
            tokenizer_roots=[str(EXAMPLES)],
            inprocess_worker="off",  # nobody judges: the queue stays as it is made here
        )
        with (
            LiveServer(create_app(settings)) as live,
            httpx.Client(base_url=live.url, timeout=30) as client,
        ):
            created = client.post("/v1/jobs", json={"rollouts": example_rollouts[:6]})
            assert created.status_code == 202, created.text
            time.sleep(1.1)  # the queue is sampled at most once a second
            before = _scrape(client)
            # No worker has run, yet the group KEDA reads exists (scaling up from zero).
            raw = redis.Redis.from_url(url, decode_responses=True)
            groups = raw.xinfo_groups(f"{prefix}:queue")
            raw.close()

            async def claim_two() -> None:  # a worker takes two (XREADGROUP), finishes none
                store = RedisStore(url, prefix=prefix, cache_ttl_s=60)
                try:
                    assert len(await RedisJobStore(store.conn, ttl_s=60).claim("w", 2, 0)) == 2
                finally:
                    await store.close()

            asyncio.run(claim_two())
            time.sleep(1.1)
            after = _scrape(client)

    assert [(g["name"], g["lag"], g["pending"]) for g in groups] == [("judges", 6, 0)]
    assert before[("judge_jobs_queue_depth", ())] == 6
    assert before[("judge_jobs_group_lag", GROUP)] == 6
    assert before[("judge_jobs_group_pending", GROUP)] == 0
    assert before[("judge_jobs_oldest_pending_age_seconds", ())] == 0
    assert 1.0 <= before[("judge_jobs_oldest_queued_age_seconds", ())] < 60
    assert after[("judge_jobs_queue_depth", ())] == 4
    assert after[("judge_jobs_group_lag", GROUP)] == 4
    assert after[("judge_jobs_group_pending", GROUP)] == 2
    assert after[("judge_jobs_pending", (("consumer", "w"),))] == 2
    # Both ages count from when the job queued its rollouts, not from the claim.
    assert after[("judge_jobs_oldest_pending_age_seconds", ())] >= 2.0
    assert after[("judge_jobs_oldest_queued_age_seconds", ())] >= 2.0


@pytest.fixture
def slow_provider() -> Iterator[FakeProviderServer]:
    with anthropic_server(delay_s=0.5) as fake:  # two turns: a session of about a second
        yield fake


def test_sessions_in_flight_are_counted_per_provider(
    slow_provider: FakeProviderServer,
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    (rollout,) = add_sessions(slow_provider, bpe, bpe_dir, ["in-flight"])
    settings = Settings(**worker_settings(slow_provider, default_tokenizer=str(bpe_dir)))
    key = ("judge_sessions_in_flight", (("provider", "anthropic"),))
    with (
        LiveServer(create_app(settings)) as live,
        httpx.Client(base_url=live.url, timeout=30) as client,
    ):
        idle = _scrape(client).get(key, 0)
        answer: list[httpx.Response] = []
        body = {"rollout": rollout, "options": {"judge": MODEL}}
        judging = threading.Thread(
            target=lambda: answer.append(client.post("/v1/judge", json=body))
        )
        judging.start()
        busy = wait_until(lambda: _scrape(client).get(key, 0) == idle + 1, 10, "the session")
        judging.join(timeout=30)
        finished = _scrape(client).get(key, 0)
    assert busy
    assert answer and answer[0].status_code == 200 and answer[0].json()["status"] == "ok"
    assert finished == idle
