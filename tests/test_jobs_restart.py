"""Restarting the API process (``judge-service serve`` with its in-process worker, killed
with SIGKILL) while it judges a job loses nothing; resubmitting with the same idempotency
key returns the same job; the worker command needs Redis and has a healthcheck."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import FakeProviderServer, anthropic_server
from tests.harness.scripted.jobs import MODEL, add_sessions, sessions, worker_settings
from tests.redis_support import (
    ROOT,
    all_results,
    free_port,
    pending_of,
    service_env,
    shared_redis,
    spawn,
    stop,
    wait_http,
    wait_job,
    wait_until,
)

pytestmark = pytest.mark.redis

ROLLOUTS = 24


@pytest.fixture
def provider() -> Iterator[FakeProviderServer]:
    with anthropic_server(delay_s=0.1) as fake:
        yield fake


@pytest.mark.slow
def test_an_api_restart_mid_job_loses_nothing(
    provider: FakeProviderServer, bpe: LoadedTokenizer, bpe_dir: Path, tmp_path: Path
) -> None:
    keys = [f"restart-{i}" for i in range(ROLLOUTS)]
    rollouts = add_sessions(provider, bpe, bpe_dir, keys)
    body = {
        "rollouts": rollouts,
        "options": {"judge": MODEL, "deadline_s": 3, "fallback": "zero"},
        "idempotency_key": "trainer-step-42",
    }
    with shared_redis() as (url, prefix):
        env = service_env(
            **worker_settings(provider, redis_url=url, redis_prefix=prefix),
            jobs_max_deadline_s=3,
            jobs_reclaim_idle_s=4,
            default_tokenizer=str(bpe_dir),
            worker_concurrency=2,
            inprocess_worker="auto",  # no separate worker: serve judges the job itself
        )
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        serve = ["serve", "--port", str(port), "--log-level", "warning"]
        first = spawn(serve, env, tmp_path / "api-1.log")
        second = None
        try:
            wait_http(base)
            with httpx.Client(base_url=base, timeout=30) as client:
                created = client.post("/v1/jobs", json=body)
                assert created.status_code == 202, created.text
                job_id = created.json()["id"]
                wait_until(
                    lambda: client.get(f"/v1/jobs/{job_id}").json()["counts"]["done"] >= 4,
                    60,
                    "the job to be under way",
                )
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=10)
            consumer = f"serve-{socket.gethostname()}-{first.pid}"
            in_flight = pending_of(url, prefix, consumer)

            second = spawn(serve, env, tmp_path / "api-2.log")
            wait_http(base)
            with httpx.Client(base_url=base, timeout=30) as client:
                again = client.post("/v1/jobs", json=body)
                assert again.status_code == 202 and again.json()["id"] == job_id
                view = wait_job(client, job_id, timeout=60)
                results = all_results(client, job_id)
        finally:
            stop(first)
            if second is not None:
                stop(second)
        logs = "\n".join(p.read_text() for p in tmp_path.glob("*.log"))
        assert view["status"] == "done" and view["counts"]["done"] == ROLLOUTS, logs
        assert [r["id"] for r in results] == keys
        assert all(r["status"] == "ok" for r in results), logs
        per_rollout = sessions(provider)
        assert set(per_rollout) == set(keys)
        assert ROLLOUTS <= sum(per_rollout.values()) <= ROLLOUTS + in_flight
        client_ = redis.Redis.from_url(url)
        assert client_.xpending(f"{prefix}:queue", "judges")["pending"] == 0
        client_.close()


def test_the_worker_command_needs_redis_and_reports_health(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "judge_service", "worker"]
    alone = subprocess.run(command, env=service_env(), capture_output=True, text=True, cwd=ROOT)
    assert alone.returncode == 2 and "JUDGE_REDIS_URL is not set" in alone.stderr
    with shared_redis() as (url, prefix):
        env = service_env(redis_url=url, redis_prefix=prefix)
        check = [*command, "--healthcheck"]
        assert subprocess.run(check, env=env, cwd=ROOT).returncode == 1  # no worker here
        beat = redis.Redis.from_url(url)
        beat.zadd(f"{prefix}:workers", {f"{socket.gethostname()}-4242": time.time()})
        beat.close()
        assert subprocess.run(check, env=env, cwd=ROOT).returncode == 0
