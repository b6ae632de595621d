"""The job queue's contract, run against both implementations (Redis Streams, in-process):
idempotent creation, exactly one result per rollout, reclaim, dead-letter counts, cancel."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from judge_service.errors import IdempotencyConflict
from judge_service.jobs.memory_queue import MemoryJobStore
from judge_service.jobs.model import CANCELLED, JobStore
from tests.redis_support import redis_job_store


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def jobs(request: pytest.FixtureRequest) -> AsyncIterator[JobStore]:
    if request.param == "memory":
        yield MemoryJobStore(ttl_s=600)
        return
    async with redis_job_store() as queue:
        yield queue


async def _create(jobs: JobStore, n: int = 3, key: str | None = None, fp: str = "f1") -> str:
    ids = [f"r{i}" for i in range(n)]
    payloads = [json.dumps({"rollout": {"id": i}, "advantage": None}) for i in ids]
    job_id, created = await jobs.create("t", key, fp, "{}", ids, payloads)
    assert created
    return job_id


async def test_same_idempotency_key_returns_the_same_job(jobs: JobStore) -> None:
    job_id = await _create(jobs, key="k")
    assert await jobs.create("t", "k", "f1", "{}", ["r0"], ["{}"]) == (job_id, False)
    with pytest.raises(IdempotencyConflict) as conflict:
        await jobs.create("t", "k", "other body", "{}", ["r0"], ["{}"])
    assert conflict.value.job_id == job_id
    # The key is per tenant: another tenant's same key is a new job.
    other, created = await jobs.create("u", "k", "f1", "{}", ["r0"], ["{}"])
    assert created and other != job_id
    # Only the first job's entries (3) and the other tenant's (1) were queued.
    entries = await jobs.claim("c", 10, block_s=0.1)
    assert sorted((e.job == job_id, e.index) for e in entries) == [
        (False, 0),
        (True, 0),
        (True, 1),
        (True, 2),
    ]


async def test_each_rollout_gets_exactly_one_result_however_often_it_is_delivered(
    jobs: JobStore,
) -> None:
    job_id = await _create(jobs, n=2)
    first, second = await jobs.claim("w1", 2, block_s=0.1)
    begin = await jobs.begin(first, "w1", max_deliveries=3)
    assert begin.kind == "go" and begin.attempts == 1
    assert json.loads(begin.payload or "")["rollout"]["id"] == "r0"
    record = await jobs.get(job_id)
    assert record is not None and record.status == "running" and record.running == 1
    assert await jobs.finish(first, '{"id": "r0", "status": "ok"}', "done") is True
    # A second write for the same rollout (a redelivery racing the first) loses.
    assert await jobs.finish(first, '{"id": "r0", "status": "failed"}', "failed") is False
    assert await jobs.begin(first, "w2", max_deliveries=3) == type(begin)("done")
    assert await jobs.result_slice(job_id, 0, 2) == ['{"id": "r0", "status": "ok"}', None]
    await jobs.begin(second, "w1", 3)
    await jobs.finish(second, '{"id": "r1", "status": "failed"}', "failed")
    record = await jobs.get(job_id)
    assert record is not None and record.status == "done" and record.finished_at
    view = record.view()
    assert (view.counts.done, view.counts.failed, view.counts.queued) == (1, 1, 0)
    assert await jobs.pending() == 0


async def test_entries_of_a_dead_consumer_are_reclaimed_after_the_idle_time(
    jobs: JobStore,
) -> None:
    await _create(jobs, n=2)
    taken = await jobs.claim("ghost", 2, block_s=0.1)
    assert len(taken) == 2 and await jobs.pending("ghost") == 2
    assert await jobs.reclaim("alive", min_idle_s=5.0, count=10) == []  # not idle long enough
    await asyncio.sleep(0.3)
    reclaimed = await jobs.reclaim("alive", min_idle_s=0.2, count=1)
    assert [e.index for e in reclaimed] == [0]
    reclaimed += await jobs.reclaim("alive", min_idle_s=0.2, count=5)
    assert sorted(e.index for e in reclaimed) == [0, 1]
    assert await jobs.pending("ghost") == 0 and await jobs.pending("alive") == 2


async def test_a_rollout_delivered_too_often_is_dead_lettered(jobs: JobStore) -> None:
    job_id = await _create(jobs, n=1)
    (entry,) = await jobs.claim("w", 1, block_s=0.1)
    for attempt in (1, 2):
        begin = await jobs.begin(entry, "w", max_deliveries=2)
        assert begin.kind == "go" and begin.attempts == attempt
        await jobs.record_error(entry, f"RuntimeError: boom {attempt}")
    dead = await jobs.begin(entry, "w", max_deliveries=2)
    assert (dead.kind, dead.attempts, dead.last_error) == ("dead", 2, "RuntimeError: boom 2")
    assert await jobs.finish(entry, '{"id": "r0"}', "dead", '{"job": "x"}') is True
    record = await jobs.get(job_id)
    assert record is not None and record.status == "failed"
    assert (record.failed, record.dead) == (1, 1)
    assert await jobs.dead_letters() == ['{"job": "x"}']


async def test_cancel_gives_unstarted_rollouts_a_cancelled_result(jobs: JobStore) -> None:
    job_id = await _create(jobs, n=3)
    entries = await jobs.claim("w", 3, block_s=0.1)
    started = entries[0]
    assert (await jobs.begin(started, "w", 3)).kind == "go"
    await jobs.cancel(job_id)
    record = await jobs.get(job_id)
    assert record is not None and record.status == "cancelled" and record.cancelled == 2
    assert record.finished_at is None  # the started one is still being judged
    assert (await jobs.begin(entries[1], "w", 3)).kind == "done"
    await jobs.finish(started, '{"id": "r0", "status": "ok"}', "done")
    record = await jobs.get(job_id)
    assert record is not None and record.status == "cancelled" and record.finished_at
    assert await jobs.result_slice(job_id, 0, 3) == [
        '{"id": "r0", "status": "ok"}',
        CANCELLED,
        CANCELLED,
    ]
    assert await jobs.ids(job_id, 1, 3) == ["r1", "r2"]


async def test_a_released_entry_is_queued_again_without_counting_the_delivery(
    jobs: JobStore,
) -> None:
    await _create(jobs, n=1)
    (entry,) = await jobs.claim("stopping", 1, block_s=0.1)
    await jobs.begin(entry, "stopping", 3)
    await jobs.release(entry, "stopping")
    assert await jobs.pending() == 0
    (again,) = await jobs.claim("next", 1, block_s=0.5)
    assert again.index == 0 and again.id != entry.id
    assert (await jobs.begin(again, "next", 3)).attempts == 1


async def test_claim_waits_for_work_and_heartbeats_are_listed(jobs: JobStore) -> None:
    assert await jobs.claim("w", 1, block_s=0.2) == []

    async def later() -> None:
        await asyncio.sleep(0.1)
        await _create(jobs, n=1)

    task = asyncio.create_task(later())
    entries = await jobs.claim("w", 1, block_s=2.0)
    await task
    assert len(entries) == 1
    await jobs.heartbeat("worker-a")
    assert await jobs.live_workers(10.0) == (["worker-a"] if jobs.shared else [])
