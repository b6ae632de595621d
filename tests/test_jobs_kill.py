"""200 rollouts judged by 3 worker processes, one of them killed with SIGKILL mid-run.

Every rollout ends with exactly one result, nothing is lost, and the scripted provider
sees no more judge sessions than rollouts plus those in flight on the killed worker (its
unacknowledged entries at the moment it died): a rollout finished before the kill is never
judged again, and one taken over is judged at most once more.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from judge_service.api.app import create_app
from judge_service.config import Settings
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.conftest import LiveServer
from tests.harness.scripted import FakeProviderServer, anthropic_server
from tests.harness.scripted.jobs import MODEL, add_sessions, sessions, worker_settings
from tests.redis_support import (
    all_results,
    pending_of,
    service_env,
    shared_redis,
    start_job_and_wait_busy,
    wait_job,
    worker_processes,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

ROLLOUTS = 200
DEADLINE_S, RECLAIM_S = 8, 9


@pytest.fixture
def provider() -> Iterator[FakeProviderServer]:
    with anthropic_server(delay_s=0.1) as fake:  # 2 calls per session: >= 0.2 s a rollout
        yield fake


def test_a_killed_worker_loses_nothing_and_pays_for_nothing_twice(
    provider: FakeProviderServer,
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    keys = [f"kill-{i}" for i in range(ROLLOUTS)]
    rollouts = add_sessions(provider, bpe, bpe_dir, keys)
    with shared_redis() as (url, prefix):
        serving = worker_settings(
            provider,
            redis_url=url,
            redis_prefix=prefix,
            jobs_max_deadline_s=DEADLINE_S,
            jobs_reclaim_idle_s=RECLAIM_S,
            default_tokenizer=str(bpe_dir),
        )
        env = service_env(**serving, worker_concurrency=4)
        names = ["kill-w0", "kill-w1", "kill-w2"]
        api = Settings(**serving, inprocess_worker="off")  # only the three workers judge
        with (
            worker_processes(names, env, tmp_path, url, prefix) as workers,
            LiveServer(create_app(api)) as live,
            httpx.Client(base_url=live.url, timeout=30) as client,
        ):
            options = {"judge": MODEL, "deadline_s": DEADLINE_S, "fallback": "zero"}
            body = {"rollouts": rollouts, "options": options}
            job_id = start_job_and_wait_busy(client, body, url, prefix, "kill-w0", 40)
            workers[0].send_signal(signal.SIGKILL)
            workers[0].wait(timeout=10)
            in_flight = pending_of(url, prefix, "kill-w0")  # frozen now: nobody acks them
            killed_at = time.monotonic()

            view = wait_job(client, job_id, timeout=90)
            results = all_results(client, job_id, limit=64)
        logs = "\n".join(p.read_text() for p in tmp_path.glob("*.log"))

        assert in_flight > 0
        assert view["status"] == "done", logs
        assert view["counts"]["done"] == ROLLOUTS and view["counts"]["failed"] == 0
        assert [r["id"] for r in results] == keys  # exactly one each, in input order
        assert all(r["status"] == "ok" and r["spans"] for r in results), logs
        stored = redis.Redis.from_url(url)
        assert stored.hlen(f"{prefix}:job:{job_id}:out") == ROLLOUTS
        assert stored.xpending(f"{prefix}:queue", "judges")["pending"] == 0
        assert stored.llen(f"{prefix}:dead") == 0
        stored.close()
        # Sessions: every rollout had one; only the killed worker's in-flight ones may
        # have had a second.
        per_rollout = sessions(provider)
        assert set(per_rollout) == set(keys)
        total = sum(per_rollout.values())
        assert ROLLOUTS <= total <= ROLLOUTS + in_flight, (total, in_flight)
        assert max(per_rollout.values()) <= 2
        # The taken-over rollouts waited for the reclaim time, not longer than needed.
        assert time.monotonic() - killed_at < RECLAIM_S + 30
