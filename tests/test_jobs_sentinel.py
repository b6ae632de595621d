"""Jobs through Redis Sentinel: a real primary, replica and three Sentinels; the primary dies.

The service reaches Redis through ``JUDGE_REDIS_URL=redis+sentinel://...`` only, so after
the failover every process finds the promoted replica by itself. Two things are shown:

- A 500-rollout job with the primary SIGKILLed mid-job completes, every rollout has
  exactly one result, and the judge sessions paid twice and the time to recover are
  measured (printed; BENCHMARKS.md "Redis Sentinel failover" records a run).
- What asynchronous replication loses, made certain rather than hoped for: replication
  is cut (`SentinelCluster.cut_replication`) before the primary dies, so writes it
  acknowledged are gone after the failover. A job accepted then vanishes and its
  idempotency key brings it back; results written then are judged again (the entries
  come back pending or queued); a job submitted with ``JUDGE_REDIS_WAIT_REPLICAS=1`` is
  refused with a 503 instead of being accepted onto the primary alone.
"""

from __future__ import annotations

import time
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
from tests.redis_support import (
    all_results,
    live_workers,
    service_env,
    spawn,
    stop,
    wait_job,
    wait_until,
)
from tests.sentinel_support import SentinelCluster

pytestmark = [pytest.mark.redis, pytest.mark.slow]

PREFIX = "sentinel-test"
OPTIONS = {"judge": MODEL, "deadline_s": 20, "fallback": "zero"}


@pytest.fixture
def provider() -> Iterator[FakeProviderServer]:
    with anthropic_server(delay_s=0.02) as fake:
        yield fake


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[SentinelCluster]:
    with SentinelCluster(tmp_path / "redis") as running:
        yield running


def _serving(
    provider: FakeProviderServer, cluster: SentinelCluster, bpe_dir: Path
) -> dict[str, Any]:
    return worker_settings(
        provider,
        redis_url=cluster.url,
        redis_prefix=PREFIX,
        default_tokenizer=str(bpe_dir),
        jobs_max_deadline_s=20,
        jobs_reclaim_idle_s=25,
    )


def _workers(
    serving: dict[str, Any], cluster: SentinelCluster, names: list[str], logs: Path
) -> list[Any]:
    """Worker processes, once all of them beat (read on the primary, before it dies)."""
    env = service_env(**serving, worker_concurrency=4)
    workers = [
        spawn(["worker", "--name", n, "--log-level", "warning"], env, logs / f"{n}.log")
        for n in names
    ]
    primary = f"redis://127.0.0.1:{cluster.primary_port}"
    try:
        wait_until(lambda: set(live_workers(primary, PREFIX)) >= set(names), 60, "the workers")
    except BaseException:
        for worker in workers:
            stop(worker)
        raise
    return workers


def _done(client: httpx.Client, job_id: str) -> int | None:
    """The job's done count, or None while the store cannot answer (mid-failover)."""
    try:
        response = client.get(f"/v1/jobs/{job_id}")
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    done: int = response.json()["counts"]["done"]
    return done


def _status(client: httpx.Client, path: str) -> int | None:
    try:
        return client.get(path).status_code
    except httpx.HTTPError:
        return None


def _check_exactly_once(
    cluster: SentinelCluster, client: httpx.Client, job_id: str, keys: list[str], logs: str
) -> None:
    view = wait_job(client, job_id, timeout=180)
    results = all_results(client, job_id, limit=100)
    assert view["status"] == "done", logs
    assert view["counts"]["done"] == len(keys) and view["counts"]["failed"] == 0, view
    assert [r["id"] for r in results] == keys  # exactly one each, in input order
    assert all(r["status"] == "ok" and r["spans"] for r in results), logs
    primary = cluster.client(cluster.replica_port)  # the promoted one
    assert primary.hlen(f"{PREFIX}:job:{job_id}:out") == len(keys)


def test_a_500_rollout_job_survives_the_primary_dying(
    provider: FakeProviderServer,
    cluster: SentinelCluster,
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    keys = [f"sentinel-{i}" for i in range(500)]
    rollouts = add_sessions(provider, bpe, bpe_dir, keys)
    serving = _serving(provider, cluster, bpe_dir)
    names = ["sen-w0", "sen-w1", "sen-w2"]
    workers = _workers(serving, cluster, names, tmp_path)
    api = Settings(**serving, inprocess_worker="off")
    try:
        with (
            LiveServer(create_app(api)) as live,
            httpx.Client(base_url=live.url, timeout=30) as client,
        ):
            created = client.post(
                "/v1/jobs", json={"rollouts": rollouts, "options": OPTIONS, "idempotency_key": "j"}
            )
            assert created.status_code == 202, created.text
            job_id = created.json()["id"]
            wait_until(lambda: (_done(client, job_id) or 0) >= 100, 120, "100 rollouts done")
            done_at_kill = _done(client, job_id)
            assert done_at_kill is not None and done_at_kill < len(keys), "killed too late"
            killed_at = cluster.kill_primary()
            promoted_at = cluster.wait_failover()
            # Recovered: the job moves on from what the new primary holds, as the API reads
            # it (the first reading may already be past the kill: workers wrote before it).
            survived = wait_until(lambda: _done(client, job_id), 60, "the API to read again")
            wait_until(
                lambda: (_done(client, job_id) or -1) > survived, 60, "progress after failover"
            )
            recovered_at = time.monotonic()
            logs = "\n".join(p.read_text() for p in tmp_path.glob("*.log"))
            _check_exactly_once(cluster, client, job_id, keys, logs)
    finally:
        for worker in workers:
            stop(worker)
    per_rollout = sessions(provider)
    assert set(per_rollout) == set(keys)
    repaid = sum(per_rollout.values()) - len(keys)
    assert max(per_rollout.values()) <= 2
    # In flight at the kill: at most the 3 workers' 4 slots, and the writes the replica
    # had not yet received (asynchronous replication; loopback keeps that window tiny).
    assert repaid <= 12 + 20, per_rollout
    print(
        f"\nsentinel failover: {len(keys)} rollouts, primary killed at {done_at_kill} done; "
        f"promoted after {promoted_at - killed_at:.2f} s, job moving again after "
        f"{recovered_at - killed_at:.2f} s; judge sessions paid twice: {repaid}"
    )


def test_writes_lost_with_the_primary_are_recovered_and_wait_refuses_to_promise(
    provider: FakeProviderServer,
    cluster: SentinelCluster,
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    keys_a = [f"lost-a-{i}" for i in range(160)]
    keys_b = [f"lost-b-{i}" for i in range(40)]
    rollouts_a = add_sessions(provider, bpe, bpe_dir, keys_a)
    rollouts_b = add_sessions(provider, bpe, bpe_dir, keys_b)
    serving = _serving(provider, cluster, bpe_dir)
    names = ["lost-w0", "lost-w1"]
    workers = _workers(serving, cluster, names, tmp_path)
    plain = Settings(**serving, inprocess_worker="off")
    waiting = Settings(
        **serving, inprocess_worker="off", redis_wait_replicas=1, redis_wait_timeout_ms=300
    )
    body_a = {"rollouts": rollouts_a, "options": OPTIONS, "idempotency_key": "a"}
    body_b = {"rollouts": rollouts_b, "options": OPTIONS, "idempotency_key": "b"}
    try:
        with (
            LiveServer(create_app(plain)) as live,
            LiveServer(create_app(waiting)) as careful,
            httpx.Client(base_url=live.url, timeout=30) as client,
            httpx.Client(base_url=careful.url, timeout=30) as careful_client,
        ):
            # Accepted with WAIT: on the replica before the 202.
            created = careful_client.post("/v1/jobs", json=body_a)
            assert created.status_code == 202, created.text
            job_a = created.json()["id"]
            wait_until(lambda: (_done(client, job_a) or 0) >= 30, 120, "30 rollouts of A")
            cluster.cut_replication()
            done_at_cut = _done(client, job_a)
            assert done_at_cut is not None

            # A job accepted now lives on the primary alone ...
            accepted = client.post("/v1/jobs", json=body_b)
            assert accepted.status_code == 202, accepted.text
            lost_job = accepted.json()["id"]
            # ... while with WAIT the same request is refused, not promised.
            refused = careful_client.post(
                "/v1/jobs", json={**body_b, "idempotency_key": "b-careful"}
            )
            assert refused.status_code == 503, refused.text
            assert "0 of 1 replica" in refused.text

            # Results acknowledged by the primary alone.
            wait_until(lambda: (_done(client, job_a) or 0) >= done_at_cut + 20, 120, "20 more of A")
            done_at_kill = _done(client, job_a)
            assert done_at_kill is not None
            cluster.kill_primary()
            cluster.wait_failover()

            # The loss is real: the accepted job is gone, A's late results too.
            gone = wait_until(
                lambda: _status(client, f"/v1/jobs/{lost_job}") not in (None, 503),
                30,
                "the API to read through the new primary",
            )
            assert _status(client, f"/v1/jobs/{lost_job}") == 404, gone
            replica = cluster.client(cluster.replica_port)
            survived = replica.hlen(f"{PREFIX}:job:{job_a}:out")
            assert survived < done_at_kill, (survived, done_at_kill)

            # Coping: the client re-sends with its idempotency key; the queue re-judges
            # the rollouts whose results were lost.
            again = client.post("/v1/jobs", json=body_b)
            assert again.status_code == 202, again.text
            assert again.json()["id"] != lost_job
            logs = "\n".join(p.read_text() for p in tmp_path.glob("*.log"))
            _check_exactly_once(cluster, client, job_a, keys_a, logs)
            _check_exactly_once(cluster, client, again.json()["id"], keys_b, logs)
    finally:
        for worker in workers:
            stop(worker)
    per_rollout = sessions(provider)
    assert set(per_rollout) == set(keys_a) | set(keys_b)
    lost_results = done_at_kill - survived
    judged_twice = sum(1 for key in keys_a if per_rollout[key] >= 2)
    assert lost_results >= 20 and max(per_rollout.values()) <= 2
    # A lost result's cached judgment went with it, so it is paid for again; nothing else
    # is, beyond what was in flight on the two workers (4 slots each) at the kill.
    assert judged_twice <= lost_results + 8, (judged_twice, lost_results)
    print(
        f"\nlost with the primary: job B (re-created by its key), {lost_results} results "
        f"of A (judged again: {judged_twice} rollouts of A had two sessions)"
    )
