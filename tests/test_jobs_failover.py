"""Worker processes that die, and one that is merely slow, against real Redis.

With the default settings (reclaim after 600 s), the rollouts a SIGKILLed worker held
are taken over by a live worker within seconds (its heartbeat went stale), each
rollout ends with exactly one result, in order. A live worker whose judge session
runs far longer than JUDGE_JOBS_DEAD_AFTER_S keeps it. ``--metrics-port`` serves the
worker's own counters and the queue's gauges.
"""

from __future__ import annotations

import signal
import subprocess
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
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.conftest import LiveServer
from tests.harness.scripted import FakeProviderServer, anthropic_server
from tests.harness.scripted.jobs import MODEL, add_sessions, sessions, worker_settings
from tests.harness.scripted.script import Action, Step, View
from tests.redis_support import (
    all_results,
    free_port,
    live_workers,
    pending_of,
    service_env,
    shared_redis,
    spawn,
    start_job_and_wait_busy,
    stop,
    wait_job,
    wait_until,
)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

TAKEOVER_S = 15  # the target, with the default JUDGE_JOBS_DEAD_AFTER_S (5 s)


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviderServer]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    with anthropic_server(delay_s=0.1) as fake:  # 2 calls per session: >= 0.2 s a rollout
        yield fake


def _consumers(url: str, prefix: str) -> set[str]:
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        return {c["name"] for c in client.xinfo_consumers(f"{prefix}:queue", "judges")}
    finally:
        client.close()


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _api_judged(client: httpx.Client) -> float:
    text = client.get("/metrics").text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "judge_results_total" and sample.labels.get("judge") == "rules"
    )


def _held_first(provider: FakeProviderServer, key: str, seconds: float) -> None:
    """Make the first session of `key` hold its first turn `seconds`; later sessions
    (a redelivery) answer at once."""
    steps = provider.book.scripts[key].steps
    first: Step = steps[0]
    assert not callable(first) and not isinstance(first, list)

    def turn(view: View) -> Action:
        if view.attempt == 0:
            provider.stopping.wait(seconds)
        return first

    provider.book.add(key, turn, *steps[1:])


def _victim_killed(process: subprocess.Popen[bytes], url: str, prefix: str, name: str) -> int:
    """SIGKILL the worker; its pending entries (frozen now: nobody acks them)."""
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    return pending_of(url, prefix, name)


def test_a_killed_workers_rollouts_are_taken_over_in_seconds_with_default_settings(
    provider: FakeProviderServer, bpe: LoadedTokenizer, bpe_dir: Path, tmp_path: Path
) -> None:
    total = 200
    keys = [f"failover-{i}" for i in range(total)]
    rollouts = add_sessions(provider, bpe, bpe_dir, keys)
    with shared_redis() as (url, prefix):
        serving = worker_settings(
            provider, redis_url=url, redis_prefix=prefix, default_tokenizer=str(bpe_dir)
        )
        defaults = Settings(**serving)
        assert (defaults.jobs_reclaim_idle_s, defaults.jobs_dead_after_s) == (600, 5)
        env = service_env(**serving, worker_concurrency=4)
        names = ["fo-w0", "fo-w1", "fo-w2"]
        workers = [
            spawn(["worker", "--name", n, "--log-level", "warning"], env, tmp_path / f"{n}.log")
            for n in names
        ]
        try:
            wait_until(lambda: set(live_workers(url, prefix)) >= set(names), 60, "3 workers")
            api = Settings(**serving, inprocess_worker="off")
            with (
                LiveServer(create_app(api)) as live,
                httpx.Client(base_url=live.url, timeout=30) as client,
            ):
                options = {"judge": MODEL, "fallback": "zero"}
                body = {"rollouts": rollouts, "options": options}
                job_id = start_job_and_wait_busy(client, body, url, prefix, "fo-w0", 30)
                killed_at = time.monotonic()
                in_flight = _victim_killed(workers[0], url, prefix, "fo-w0")
                wait_until(
                    lambda: pending_of(url, prefix, "fo-w0") == 0, 60, "the takeover", every=0.1
                )
                taken_after = time.monotonic() - killed_at
                wait_until(lambda: "fo-w0" not in _consumers(url, prefix), 30, "its removal")
                view = wait_job(client, job_id, timeout=120)
                results = all_results(client, job_id, limit=100)
        finally:
            for worker in workers:
                stop(worker)
        logs = "\n".join(p.read_text() for p in tmp_path.glob("*.log"))

        assert in_flight > 0
        assert taken_after < TAKEOVER_S, (taken_after, logs)
        assert view["status"] == "done" and view["counts"]["done"] == total, logs
        assert [r["id"] for r in results] == keys  # exactly one each, in input order
        assert all(r["status"] == "ok" for r in results), logs
        per_rollout = sessions(provider)
        assert set(per_rollout) == set(keys)
        assert total <= sum(per_rollout.values()) <= total + in_flight
        assert "took over" in logs and "dead worker fo-w0" in logs


def test_a_live_workers_slow_session_is_never_taken_over(
    provider: FakeProviderServer, bpe: LoadedTokenizer, bpe_dir: Path, tmp_path: Path
) -> None:
    # The slow session lasts 10 × dead_after: it is still running when the victim's rollouts
    # are taken over (the slow worker, busy, takes none of them). dead_after is 4 s, not
    # less: on 2 loaded cores a live victim's heartbeat was seen late at 2 s, and the
    # taker took one of its rollouts before the kill.
    dead_after, slow_s = 4.0, 40.0
    victims = ["victim-0", "victim-1"]
    rollouts = add_sessions(provider, bpe, bpe_dir, ["slow-0", *victims])
    _held_first(provider, "slow-0", slow_s)
    for key in victims:
        _held_first(provider, key, 60.0)  # the victim dies long before these end
    port = free_port()
    with shared_redis() as (url, prefix):
        serving = worker_settings(
            provider,
            redis_url=url,
            redis_prefix=prefix,
            default_tokenizer=str(bpe_dir),
            llm_request_timeout_s=60,
            jobs_dead_after_s=dead_after,
        )
        env = service_env(**serving)

        def worker(name: str, concurrency: int, *extra: str) -> subprocess.Popen[bytes]:
            args = ["worker", "--name", name, "--concurrency", str(concurrency), *extra]
            return spawn([*args, "--log-level", "info"], env, tmp_path / f"{name}.log")

        processes = [worker("slow", 1)]
        try:
            wait_until(lambda: "slow" in live_workers(url, prefix), 60, "the slow worker")
            api = Settings(**serving, inprocess_worker="off")
            with (
                LiveServer(create_app(api)) as live,
                httpx.Client(base_url=live.url, timeout=30) as client,
            ):
                options = {"judge": MODEL, "deadline_s": 60, "fallback": "zero"}

                def submit(batch: list[dict[str, Any]]) -> str:
                    created = client.post("/v1/jobs", json={"rollouts": batch, "options": options})
                    assert created.status_code == 202, created.text
                    job_id: str = created.json()["id"]
                    return job_id

                slow_job = submit(rollouts[:1])
                wait_until(lambda: pending_of(url, prefix, "slow") == 1, 60, "the slow session")
                slow_began = time.monotonic()
                processes.append(worker("victim", 2))
                victim_job = submit(rollouts[1:])
                wait_until(
                    lambda: all(provider.book.attempts.get((k, 0)) for k in victims),
                    60,
                    "the victim's sessions",
                )
                processes.append(worker("taker", 2, "--metrics-port", str(port)))
                wait_until(lambda: "taker" in live_workers(url, prefix), 60, "the taker")
                in_flight = _victim_killed(processes[1], url, prefix, "victim")
                killed_at = time.monotonic()
                wait_until(lambda: pending_of(url, prefix, "victim") == 0, 60, "the takeover")
                taken_after = time.monotonic() - killed_at
                # Long past dead_after, and with a worker taking over, the slow worker still
                # holds its own session. (A quick takeover can end before 3 x dead_after
                # have passed since the slow session began: then wait for that first.)
                time.sleep(max(0.0, 3 * dead_after + 0.5 - (time.monotonic() - slow_began)))
                held_late = pending_of(url, prefix, "slow")
                held_for = time.monotonic() - slow_began
                views = [wait_job(client, j, timeout=60) for j in (slow_job, victim_job)]
                results = [r for j in (slow_job, victim_job) for r in all_results(client, j)]

                def sampled() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
                    figures = _scrape(port)
                    done = figures.get(("judge_jobs", (("status", "done"),)), 0)
                    return figures if done >= 2 else {}

                figures = wait_until(sampled, 30, "the taker's gauges", every=0.5)
        finally:
            for process in processes:
                stop(process)
        logs = "\n".join(p.read_text() for p in tmp_path.glob("*.log"))

    assert in_flight == 2 and taken_after < TAKEOVER_S, (taken_after, logs)
    assert held_late == 1 and held_for > 3 * dead_after, held_for
    assert [v["status"] for v in views] == ["done", "done"]
    assert [r["id"] for r in results] == ["slow-0", "victim-0", "victim-1"]
    assert all(r["status"] == "ok" for r in results), logs
    # Judge sessions begun per rollout (first turns asked for; none is retried here).
    begun = {key: provider.book.attempts.get((key, 0), 0) for key in ("slow-0", "victim-0")}
    assert begun["slow-0"] == 1  # never handed to a second worker
    assert begun["victim-0"] == provider.book.attempts.get(("victim-1", 0)) == 2
    # The taker's own /metrics: what it took over and judged, and the queue as it saw it.
    assert figures[("judge_jobs_reclaims_total", (("reason", "dead_consumer"),))] == 2
    assert figures.get(("judge_jobs_reclaims_total", (("reason", "idle"),)), 0) == 0
    judged = {labels: v for (name, labels), v in figures.items() if name == "judge_results_total"}
    assert sum(v for labels, v in judged.items() if ("status", "ok") in labels) == 2, figures
    assert figures[("judge_jobs_queue_depth", ())] == 0
    assert ("judge_jobs_heartbeat_age_seconds", (("consumer", "taker"),)) in figures
    assert ("judge_jobs_heartbeat_age_seconds", (("consumer", "victim"),)) not in figures


def test_the_worker_serves_its_own_metrics(
    bpe: LoadedTokenizer, bpe_dir: Path, tmp_path: Path
) -> None:
    right = "<think>\n17 × 24 = 408.\n</think>\n\\boxed{408}"
    ids = bpe.hf.encode(right, add_special_tokens=False)
    rollouts = [
        {"id": f"m-{i}", "response_token_ids": ids, "reference_answer": "408"} for i in range(5)
    ]
    port = free_port()
    with shared_redis() as (url, prefix):
        serving = {"redis_url": url, "redis_prefix": prefix, "default_tokenizer": str(bpe_dir)}
        name = "metrics-w"
        args = ["worker", "--name", name, "--metrics-port", str(port), "--metrics-host"]
        process = spawn([*args, "127.0.0.1"], service_env(**serving), tmp_path / "w.log")
        try:
            wait_until(lambda: name in live_workers(url, prefix), 60, "the worker")
            with (
                LiveServer(create_app(Settings(**serving, inprocess_worker="off"))) as live,
                httpx.Client(base_url=live.url, timeout=30) as client,
            ):
                api_before = _api_judged(client)
                body = {"rollouts": rollouts, "options": {"judge": "rules"}}
                created = client.post("/v1/jobs", json=body)
                assert created.status_code == 202, created.text
                view = wait_job(client, created.json()["id"], timeout=60)
                api_after = _api_judged(client)

            def sampled() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
                figures = _scrape(port)
                return figures if figures.get(("judge_jobs", (("status", "done"),))) else {}

            figures = wait_until(sampled, 30, "a sample of the queue", every=0.5)
        finally:
            stop(process)
        log = (tmp_path / "w.log").read_text()

    assert view["counts"]["done"] == 5, log
    ok = ("judge_results_total", (("judge", "rules"), ("status", "ok")))
    assert figures[ok] == 5  # counted where it was judged: in the worker
    assert api_after == api_before  # (the API judged none of them)
    assert figures[("judge_jobs", (("status", "done"),))] == 1
    assert figures[("judge_jobs_in_flight", ())] == 0
    assert figures[("judge_jobs_dead_letters", ())] == 0
    assert 0 <= figures[("judge_jobs_heartbeat_age_seconds", (("consumer", name),))] < 5
