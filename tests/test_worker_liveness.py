"""A worker answers its own liveness (jobs/liveness.py): ``GET /healthz`` on its metrics
port, 200 while its last heartbeat reached Redis within 30 s, 503 before the first and
once it is older; every other path still serves the Prometheus metrics. The Helm chart
probes it (httpGet) instead of starting ``judge-service worker --healthcheck`` per probe
(bench/bench_worker_probe.py measures both).
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter

from judge_service.jobs.liveness import HEALTHY_WITHIN_S, Liveness, serve
from tests.redis_support import free_port, service_env, shared_redis, spawn, stop, wait_until


def test_healthz_answers_from_the_last_heartbeat_and_metrics_stay() -> None:
    registry = CollectorRegistry()
    Counter("probe_test_total", "a metric of this registry", registry=registry).inc()
    liveness = Liveness()
    server = serve("127.0.0.1", 0, registry, liveness)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        before = httpx.get(f"{url}/healthz")
        assert before.status_code == 503
        assert before.json() == {"alive": False, "heartbeat_age_s": None}
        liveness.beat()
        fresh = httpx.get(f"{url}/healthz")
        assert fresh.status_code == 200 and fresh.json()["alive"] is True
        assert 0 <= fresh.json()["heartbeat_age_s"] < HEALTHY_WITHIN_S
        liveness._at = time.monotonic() - HEALTHY_WITHIN_S - 1  # the pulse stopped a while ago
        stale = httpx.get(f"{url}/healthz")
        assert stale.status_code == 503 and stale.json()["alive"] is False
        assert "probe_test_total 1.0" in httpx.get(f"{url}/metrics").text
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.redis
def test_a_running_worker_is_alive_on_its_metrics_port(tmp_path: Path) -> None:
    port = free_port()
    with shared_redis() as (redis_url, prefix):
        env = service_env(redis_url=redis_url, redis_prefix=prefix)
        args = ["worker", "--metrics-host", "127.0.0.1", "--metrics-port", str(port)]
        worker = spawn(args, env, tmp_path / "worker.log")
        try:

            def alive() -> bool:
                try:
                    answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                except httpx.HTTPError:
                    return False
                return answer.status_code == 200 and answer.json()["alive"] is True

            wait_until(alive, 60, "the worker's /healthz")
            metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
            assert "judge_jobs_group_lag" in metrics
        finally:
            stop(worker)
