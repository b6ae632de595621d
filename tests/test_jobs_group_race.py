"""Two worker processes racing on one group. Worker A is cut off from Redis at the moment it
commits the group (`tests.harness.redis_hold`) and paused (SIGSTOP) past its lease; B takes
the group over, judges it again (from the judgments A cached: `cache` "hit" where A's
results say "miss") and is cut off at its own commit, its members' results written; then A
comes back and commits first. Every result of the group, and its block, must come from
one judging (B's, which holds the group), each counted once. Real Redis, real processes
over real sockets, real HTTP."""

from __future__ import annotations

import hashlib
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
import redis

from judge_service.api.app import create_app
from judge_service.config import Settings
from judge_service.jobs import scripts
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.conftest import LiveServer
from tests.harness.redis_hold import HoldingProxy
from tests.redis_support import (
    live_workers,
    service_env,
    shared_redis,
    spawn,
    stop,
    wait_job,
    wait_until,
)
from tests.test_group_route import FALSE_AT_3, RIGHT, WRONG_PLAN
from tests.test_group_route import rollout as route_rollout
from tests.test_jobs_groupwise import GROUPWISE, pages

pytestmark = [pytest.mark.redis, pytest.mark.slow]

COMMIT = hashlib.sha1(scripts.FINISH_GROUP.encode()).hexdigest().encode()


def running_under(url: str, prefix: str, job_id: str) -> set[str]:
    client: Any = redis.Redis.from_url(url, decode_responses=True)  # loosely typed stubs
    try:
        return set(client.hvals(f"{prefix}:job:{job_id}:run"))
    finally:
        client.close()


def logs(where: Path) -> str:
    return "\n".join(f"{p.name}:\n{p.read_text()}" for p in sorted(where.glob("*.log")))


@pytest.fixture
def proxies() -> Iterator[tuple[HoldingProxy, HoldingProxy]]:
    with shared_redis() as (url, _):
        where = urlparse(url)
        host, port = where.hostname or "127.0.0.1", where.port or 6379
        with HoldingProxy(host, port) as a, HoldingProxy(host, port) as b:
            yield a, b


def test_a_worker_paused_past_its_lease_never_mixes_its_group_with_its_takers(
    proxies: tuple[HoldingProxy, HoldingProxy],
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    tmp_path: Path,
) -> None:
    lines = (RIGHT, FALSE_AT_3, WRONG_PLAN, RIGHT)
    rows = [route_rollout(bpe, f"r{m}", list(text), float(m % 2)) for m, text in enumerate(lines)]
    to_a, to_b = proxies
    with shared_redis() as (url, prefix):
        serving: dict[str, Any] = {
            "redis_prefix": prefix,
            "default_tokenizer": str(bpe_dir),
            "jobs_dead_after_s": 1.0,
        }
        api = Settings(redis_url=url, **serving, inprocess_worker="off")
        a_env = service_env(redis_url=f"redis://127.0.0.1:{to_a.port}/0", **serving)
        b_env = service_env(redis_url=f"redis://127.0.0.1:{to_b.port}/0", **serving)
        to_a.hold_at(COMMIT)
        to_b.hold_at(COMMIT)
        a = spawn(["worker", "--name", "race-a", "--log-level", "info"], a_env, tmp_path / "a.log")
        b = None
        try:
            wait_until(lambda: "race-a" in live_workers(url, prefix), 60, "worker A")
            with (
                LiveServer(create_app(api)) as live,
                httpx.Client(base_url=live.url, timeout=30) as client,
            ):
                created = client.post("/v1/jobs", json={"rollouts": rows, "options": GROUPWISE})
                assert created.status_code == 202, created.text
                job_id = created.json()["id"]
                # A has judged the group and written its members; its commit waits unsent.
                assert to_a.held.wait(60), logs(tmp_path)
                a.send_signal(signal.SIGSTOP)
                b = spawn(
                    ["worker", "--name", "race-b", "--log-level", "info"], b_env, tmp_path / "b.log"
                )
                # B finds A dead, takes the group over, judges it and writes its members.
                assert to_b.held.wait(120), logs(tmp_path)  # B starts (a loaded machine)
                assert running_under(url, prefix, job_id) == {"race-b"}
                view = client.get(f"/v1/jobs/{job_id}").json()
                assert view["counts"] == {**view["counts"], "running": 4, "done": 0}
                a.send_signal(signal.SIGCONT)
                to_a.release()  # A's commit reaches Redis first
                assert to_a.answered.wait(30), logs(tmp_path)
                to_b.release()
                view = wait_job(client, job_id, timeout=60)
                results, groups = pages(client, job_id, limit=2)
        finally:
            to_a.release()
            to_b.release()
            for process in (a, b):
                if process is not None:
                    process.send_signal(signal.SIGCONT)
                    stop(process)
        logged = logs(tmp_path)

    assert view["status"] == "done", logged
    assert view["counts"]["done"] == len(rows) and view["counts"]["failed"] == 0, view
    assert [r["id"] for r in results] == [r["id"] for r in rows]
    # One judging: B's, served from the judgments A cached; none of A's own results.
    assert [r["cache"] for r in results] == ["hit"] * len(rows), json.dumps(results)[:2000]
    assert set(groups) == {"g"} and groups["g"]["size"] == len(rows)
    assert "took over 1 rollout(s) of dead worker race-a" in logged
