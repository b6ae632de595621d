"""Groups spread over workers: a worker claims by its judging slots, not by queue entries.

As a new user would run it, with default settings (8 slots a worker): two worker
processes, a groupwise job of 4 groups of 8 and an LLM judge whose sessions the test holds
at their first turn. Each worker claims one group (its 8 members hold all 8 slots), the
other two stay queued for whichever worker frees its slots first, and the job's counts say
so: 16 running, 16 queued. Before, one worker claimed all 4 groups (4 entries, 8 slots)
and judged them one after another while the other had nothing, and the counts read
running 4, queued 28. Real Redis, real processes, the real SDK against a scripted
provider."""

from __future__ import annotations

import threading
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
from tests.harness.scripted.jobs import MODEL, scripted_groups, sessions, worker_settings
from tests.redis_support import (
    pending_of,
    service_env,
    shared_redis,
    wait_job,
    wait_until,
    worker_processes,
)
from tests.test_jobs_groupwise import pages

pytestmark = [pytest.mark.redis, pytest.mark.slow]

GROUPS, SIZE = 4, 8


@pytest.fixture
def provider() -> Iterator[FakeProviderServer]:
    with anthropic_server() as fake:
        yield fake


def test_groups_spread_over_workers_and_the_counts_say_what_runs(
    provider: FakeProviderServer,
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    gate, arrived = threading.Event(), []

    def held(name: str) -> None:  # a group's session waits here until the test looked
        arrived.append(name)
        gate.wait(60)

    names = [f"spread-{g}" for g in range(GROUPS)]
    rows = scripted_groups(provider, bpe, bpe_dir, names, SIZE, before=held)
    with shared_redis() as (url, prefix):
        serving: dict[str, Any] = worker_settings(
            provider,
            redis_url=url,
            redis_prefix=prefix,
            default_tokenizer=str(bpe_dir),
            llm_request_timeout_s=90,
        )
        workers = ["spread-a", "spread-b"]
        api = Settings(**serving, inprocess_worker="off")
        try:
            with (
                worker_processes(workers, service_env(**serving), tmp_path, url, prefix),
                LiveServer(create_app(api)) as live,
                httpx.Client(base_url=live.url, timeout=30) as client,
            ):
                options = {"judge": MODEL, "deadline_s": 120, "groupwise": True}
                created = client.post("/v1/jobs", json={"rollouts": rows, "options": options})
                assert created.status_code == 202, created.text
                job_id = created.json()["id"]
                wait_until(lambda: len(arrived) >= 2, 60, "two groups judged at once")
                held_by = {w: pending_of(url, prefix, w) for w in workers}
                counts = client.get(f"/v1/jobs/{job_id}").json()["counts"]
                gate.set()
                view = wait_job(client, job_id, timeout=120)
                results, blocks = pages(client, job_id, limit=100)
        finally:
            gate.set()
        logs = "\n".join(p.read_text() for p in tmp_path.glob("*.log"))

    # One group (8 slots) on each worker, the other two queued, and the counts true.
    assert held_by == {"spread-a": 1, "spread-b": 1}, held_by
    assert (counts["running"], counts["queued"]) == (2 * SIZE, 2 * SIZE), counts
    assert view["status"] == "done" and view["counts"]["done"] == GROUPS * SIZE, logs
    assert all(r["status"] == "ok" for r in results)
    assert set(blocks) == set(names) and sessions(provider) == dict.fromkeys(names, 1)
