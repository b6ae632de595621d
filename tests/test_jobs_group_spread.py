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
from contextlib import contextmanager
from dataclasses import dataclass
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


@dataclass
class Busy:
    """Two default workers, each holding one group of the job's four at its first turn."""

    client: httpx.Client
    job_id: str
    held_by: dict[str, int]  # groups pending under each worker
    counts: dict[str, int]  # the job's counts meanwhile
    gate: threading.Event  # set: the held sessions go on
    names: list[str]  # the groups, in job order
    rows: list[dict[str, Any]]


@contextmanager
def two_workers_busy(
    provider: FakeProviderServer, bpe: LoadedTokenizer, bpe_dir: Path, logs: Path
) -> Iterator[Busy]:
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
                worker_processes(workers, service_env(**serving), logs, url, prefix),
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
                yield Busy(client, job_id, held_by, counts, gate, names, rows)
        finally:
            gate.set()


def test_groups_spread_over_workers_and_the_counts_say_what_runs(
    provider: FakeProviderServer, bpe: LoadedTokenizer, bpe_dir: Path, tmp_path: Path
) -> None:
    with two_workers_busy(provider, bpe, bpe_dir, tmp_path) as busy:
        busy.gate.set()
        view = wait_job(busy.client, busy.job_id, timeout=120)
        results, blocks = pages(busy.client, busy.job_id, limit=100)
    logs = "\n".join(p.read_text() for p in tmp_path.glob("*.log"))

    # One group (8 slots) on each worker, the other two queued, and the counts true.
    assert busy.held_by == {"spread-a": 1, "spread-b": 1}, busy.held_by
    assert (busy.counts["running"], busy.counts["queued"]) == (2 * SIZE, 2 * SIZE), busy.counts
    assert view["status"] == "done" and view["counts"]["done"] == GROUPS * SIZE, logs
    assert all(r["status"] == "ok" for r in results)
    names = busy.names
    assert set(blocks) == set(names) and sessions(provider) == dict.fromkeys(names, 1)


def test_a_cancel_mid_group_leaves_the_groups_in_flight_whole(
    provider: FakeProviderServer, bpe: LoadedTokenizer, bpe_dir: Path, tmp_path: Path
) -> None:
    with two_workers_busy(provider, bpe, bpe_dir, tmp_path) as busy:
        assert busy.client.delete(f"/v1/jobs/{busy.job_id}").status_code in (200, 202)
        # The two groups being judged keep running whole; the two queued are cancelled.
        cancelling = busy.client.get(f"/v1/jobs/{busy.job_id}").json()
        busy.gate.set()
        view = wait_job(busy.client, busy.job_id, timeout=120)
        results, blocks = pages(busy.client, busy.job_id, limit=100)

    assert cancelling["counts"] == {
        **cancelling["counts"], "running": 2 * SIZE, "queued": 0, "cancelled": 2 * SIZE,
        "done": 0,
    }  # fmt: skip
    assert view["status"] == "cancelled"
    assert (view["counts"]["done"], view["counts"]["cancelled"]) == (2 * SIZE, 2 * SIZE)
    by_group: dict[str, set[str]] = {}
    for row, result in zip(busy.rows, results, strict=True):
        by_group.setdefault(row["group_id"], set()).add(result["status"])
    # Each group whole: judged (every sibling ok) or cancelled (every sibling), never split.
    assert sorted(by_group.values(), key=sorted) == [{"failed"}] * 2 + [{"ok"}] * 2, by_group
    judged = {g for g, statuses in by_group.items() if statuses == {"ok"}}
    assert set(blocks) == judged and sessions(provider) == dict.fromkeys(judged, 1)
