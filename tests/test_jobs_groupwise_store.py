"""The queue's contract for groupwise jobs, run against both implementations (Redis Streams,
in-process): a group is one entry, begun whole; its members' results are provisional
(hidden, uncounted, rewritable, its holder's only) until one commit writes the group with
its block and acknowledgement; it is released whole, cancelled whole when its worker
died, and dead-lettered whole by a real worker."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from judge_service.config import Settings
from judge_service.jobs.memory_queue import MemoryJobStore
from judge_service.jobs.model import CANCELLED, GroupWrite, JobStore
from judge_service.jobs.worker import Worker, WorkerConfig
from judge_service.pipeline import Engine
from judge_service.schemas import Options
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted.jobs import stored_payloads, work_until_finished
from tests.redis_support import redis_job_store

GROUPWISE = Options(judge="rules", groupwise=True, deadline_s=30).model_dump_json(exclude_none=True)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def jobs(request: pytest.FixtureRequest) -> AsyncIterator[JobStore]:
    if request.param == "memory":
        yield MemoryJobStore(ttl_s=600)
        return
    async with redis_job_store() as queue:
        yield queue


async def _job(jobs: JobStore, payloads: list[str] | None = None) -> str:
    """r0..r3: r0, r1, r2 one group (leader r0), r3 alone."""
    ids = [f"r{i}" for i in range(4)]
    payloads = payloads or [json.dumps({"rollout": {"id": i}}) for i in ids]
    leader = json.loads(payloads[0])
    payloads[0] = json.dumps({**leader, "group": [0, 1, 2]})
    job_id, _ = await jobs.create("t", None, "fp", GROUPWISE, ids, payloads, {1: 0, 2: 0})
    return job_id


def _ok(indices: list[int]) -> list[GroupWrite]:
    return [(i, json.dumps({"id": f"r{i}", "status": "ok"}), "done") for i in indices]


async def _running(jobs: JobStore, job_id: str) -> int:
    record = await jobs.get(job_id)
    assert record is not None
    return record.running


async def test_a_group_is_one_entry_begun_and_written_whole(jobs: JobStore) -> None:
    job_id = await _job(jobs)
    entries = await jobs.claim("w1", 10, block_s=0.1)
    assert [e.index for e in entries] == [0, 3]  # the group's leader, the rollout alone
    leader = entries[0]
    assert (await jobs.begin(leader, "w1", max_deliveries=3)).kind == "go"
    assert await _running(jobs, job_id) == 3  # the whole group is in flight
    record = json.dumps({"group_id": "g", "block": {"size": 3}})
    assert await jobs.finish_group(leader, _ok([1, 2, 0]), record) == 3
    assert await jobs.result_slice(job_id, 0, 4) == [*(w[1] for w in _ok([0, 1, 2])), None]
    assert await jobs.group_records(job_id, 0, 4) == [record]
    assert await jobs.group_records(job_id, 1, 4) == []  # by its leader's index only
    # A second writer (a redelivery racing the first) writes nothing, not even the block.
    assert await jobs.finish_group(leader, _ok([0, 1, 2]), "{}") == 0
    assert await jobs.group_records(job_id, 0, 1) == [record]
    assert await _running(jobs, job_id) == 0 and await jobs.pending() == 1  # r3's entry
    alone = entries[1]
    await jobs.begin(alone, "w1", 3)
    await jobs.finish(alone, '{"id": "r3", "status": "ok"}', "done")
    job = await jobs.get(job_id)
    assert job is not None and job.status == "done" and (job.done, job.failed) == (4, 0)


async def test_a_group_is_claimed_by_the_slots_it_holds(jobs: JobStore) -> None:
    await _job(jobs)  # a group of 3 (its leader's entry), then a rollout alone
    # Two free slots: the group (three) does not fit, and nothing behind it jumps ahead.
    none = await jobs.claim("w1", 2, block_s=0.1)
    assert none == [] and none.full
    # A worker of two slots takes the group whole, as all its slots (capped).
    (group,) = await jobs.claim("w1", 2, block_s=0.1, cap=2)
    assert (group.index, group.size, group.slots(2), group.slots(8)) == (0, 3, 2, 3)
    (alone,) = await jobs.claim("w2", 3, block_s=0.1)
    assert (alone.index, alone.size) == (3, 1)
    empty = await jobs.claim("w2", 3, block_s=0.1)
    assert empty == [] and not empty.full  # nothing queued: it waited, not "full"


async def test_an_idle_workers_group_is_taken_over_by_slots(jobs: JobStore) -> None:
    await _job(jobs)
    assert len(await jobs.claim("ghost", 4, block_s=0.1)) == 2  # the group, then r3
    # In queue order: the group comes first and needs three slots, so two take nothing.
    assert await jobs.reclaim("next", 0.0, 2) == []
    group, alone = await jobs.reclaim("next", 0.0, 4)
    assert (group.index, group.size, alone.index, alone.size) == (0, 3, 3, 1)


async def test_members_written_first_are_provisional_until_the_commit(jobs: JobStore) -> None:
    job_id = await _job(jobs)
    leader, _ = await jobs.claim("w1", 10, block_s=0.1)
    await jobs.begin(leader, "w1", 3)
    assert await jobs.write_members(leader, "w1", [(1, '{"id": "r1", "v": 1}')]) == 1
    assert await jobs.write_members(leader, "w1", [(2, '{"id": "r2", "v": 1}')]) == 1
    # Neither shown (not even from a cursor past the leader) nor counted.
    assert await jobs.result_slice(job_id, 1, 2) == [None, None]
    job = await jobs.get(job_id)
    assert job is not None and (job.done, job.running) == (0, 3)
    # Judged again before the commit (the same holder's retry): the later write stands.
    assert await jobs.write_members(leader, "w1", [(1, '{"id": "r1", "v": 2}')]) == 1
    commit: list[GroupWrite] = [(1, None, "done"), (2, None, "failed"), *_ok([0])]
    assert await jobs.finish_group(leader, commit, '{"group_id": "g", "block": {}}') == 3
    assert await jobs.result_slice(job_id, 0, 3) == [
        _ok([0])[0][1],
        '{"id": "r1", "v": 2}',
        '{"id": "r2", "v": 1}',
    ]
    job = await jobs.get(job_id)
    assert job is not None and (job.done, job.failed, job.running) == (2, 1, 0)
    # Committed: no one writes a member any more.
    assert await jobs.write_members(leader, "w1", [(1, "{}")]) == 0


async def test_a_commit_naming_a_member_never_written_does_nothing(jobs: JobStore) -> None:
    job_id = await _job(jobs)
    leader, _ = await jobs.claim("w1", 10, block_s=0.1)
    await jobs.begin(leader, "w1", 3)
    await jobs.write_members(leader, "w1", [(1, "{}")])
    with pytest.raises(LookupError):
        await jobs.finish_group(leader, [(1, None, "done"), (2, None, "done"), *_ok([0])])
    job = await jobs.get(job_id)
    assert job is not None and (job.done, job.running) == (0, 3)
    assert await jobs.pending() == 2  # the leader's entry stays, to be delivered again


async def test_only_the_groups_holder_writes_its_results(jobs: JobStore) -> None:
    job_id = await _job(jobs)
    leader, _ = await jobs.claim("slow", 10, block_s=0.1)
    await jobs.begin(leader, "slow", 3)
    slow = [(i, f'{{"by": "slow", "i": {i}}}') for i in range(3)]
    assert await jobs.write_members(leader, "slow", slow[:2]) == 1  # the leader's too
    # "slow" is taken for dead: its entry goes to "next", who begins the group again (the
    # leader's provisional result is no result: the group is not done).
    (taken,) = await jobs.reclaim("next", min_idle_s=0.0, count=3)  # the group: 3 slots
    assert taken.index == 0 and (await jobs.begin(taken, "next", 3)).kind == "go"
    assert await jobs.write_members(leader, "slow", slow[2:]) == 0
    by_next = [(i, f'{{"by": "next", "i": {i}}}') for i in range(3)]
    assert await jobs.write_members(taken, "next", by_next[:2]) == 1
    assert await jobs.write_members(taken, "next", by_next[2:]) == 1
    # "slow" comes back and commits: nothing of it stands, and the entry stays "next"'s.
    commit: list[GroupWrite] = [(i, None, "done") for i in range(3)]
    assert await jobs.finish_group(leader, commit, "{}", holder="slow") == 0
    assert await jobs.result_slice(job_id, 0, 3) == [None] * 3
    assert await _running(jobs, job_id) == 3 and await jobs.pending() == 2
    assert await jobs.finish_group(taken, commit, "{}", holder="next") == 3
    assert await jobs.result_slice(job_id, 0, 3) == [r for _, r in by_next]
    # Committed: a late write of "slow" changes nothing.
    assert await jobs.write_members(leader, "slow", slow) == 0
    assert await jobs.result_slice(job_id, 0, 3) == [r for _, r in by_next]


async def test_a_commit_of_results_another_wrote_is_refused(jobs: JobStore) -> None:
    job_id = await _job(jobs)
    leader, _ = await jobs.claim("w1", 10, block_s=0.1)
    await jobs.begin(leader, "w1", 3)
    await jobs.write_members(leader, "w1", [(i, "{}") for i in range(3)])
    (taken,) = await jobs.reclaim("w2", min_idle_s=0.0, count=3)
    await jobs.begin(taken, "w2", 3)
    await jobs.write_members(taken, "w2", [(0, "{}")])  # 1 and 2 are still w1's
    with pytest.raises(LookupError):
        await jobs.finish_group(taken, [(i, None, "done") for i in range(3)], holder="w2")
    assert await _running(jobs, job_id) == 3 and await jobs.result_slice(job_id, 0, 3) == [None] * 3


async def test_a_released_group_is_queued_again_whole(jobs: JobStore) -> None:
    job_id = await _job(jobs)
    leader, _ = await jobs.claim("w1", 10, block_s=0.1)
    await jobs.begin(leader, "w1", 3)
    await jobs.write_members(leader, "w1", [(1, "{}")])
    await jobs.release(leader, "w1")  # its worker stops before committing it
    assert await _running(jobs, job_id) == 0
    assert await jobs.result_slice(job_id, 0, 3) == [None] * 3  # the provisional one dropped
    (again,) = [e for e in await jobs.claim("w2", 10, block_s=0.1) if e.index == 0]
    begin = await jobs.begin(again, "w2", 3)
    assert begin.kind == "go" and begin.attempts == 1  # the release was not counted
    assert await _running(jobs, job_id) == 3


async def test_a_cancel_leaves_a_group_in_flight_to_its_worker(jobs: JobStore) -> None:
    job_id = await _job(jobs)
    leader, _ = await jobs.claim("w1", 10, block_s=0.1)
    await jobs.begin(leader, "w1", 3)
    await jobs.cancel(job_id)
    # The rollout alone (not started) is cancelled; the group, begun whole, finishes whole.
    assert await jobs.result_slice(job_id, 0, 4) == [None, None, None, CANCELLED]
    job = await jobs.get(job_id)
    assert job is not None and (job.running, job.cancelled, job.done) == (3, 1, 0)
    assert job.finished_at is None
    assert await jobs.finish_group(leader, _ok([1, 2, 0]), "{}") == 3
    job = await jobs.get(job_id)
    assert job is not None and job.status == "cancelled" and job.finished_at
    assert (job.done, job.cancelled) == (3, 1)


async def test_a_group_whose_worker_died_is_cancelled_whole_by_the_next(
    jobs: JobStore, bpe_dir: Path
) -> None:
    job_id = await _job(jobs)
    leader, _ = await jobs.claim("ghost", 10, block_s=0.1)
    await jobs.begin(leader, "ghost", 3)
    await jobs.write_members(leader, "ghost", [(1, "{}")])  # and then the worker died
    await jobs.cancel(job_id)
    job = await jobs.get(job_id)
    assert job is not None and job.finished_at is None  # the group is still running
    await _run_worker(jobs, job_id, Engine(Settings(default_tokenizer=str(bpe_dir))))
    assert await jobs.result_slice(job_id, 0, 4) == [CANCELLED] * 4
    job = await jobs.get(job_id)
    assert job is not None and job.status == "cancelled" and job.cancelled == 4


async def test_a_poison_group_is_dead_lettered_whole_with_one_record(
    jobs: JobStore, bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    payloads = stored_payloads(bpe, [f"r{i}" for i in range(4)])
    # A member no worker can read: judging the group raises on every delivery.
    payloads[2] = json.dumps({"advantage": None, "rollout": {"id": "r2"}})
    job_id = await _job(jobs, payloads)
    engine = Engine(Settings(default_tokenizer=str(bpe_dir)))
    await _run_worker(jobs, job_id, engine)
    results = [json.loads(r or "null") for r in await jobs.result_slice(job_id, 0, 4)]
    assert [r["id"] for r in results] == ["r0", "r1", "r2", "r3"]
    for result in results[:3]:
        assert result["status"] == "failed", result
        assert result["error"].startswith("dead-letter: gave up after 2 deliveries; last error")
    assert results[3]["status"] == "ok"
    (letter,) = [json.loads(r) for r in await jobs.dead_letters()]
    assert (letter["job"], letter["index"], letter["group"]) == (job_id, 0, [0, 1, 2])
    job = await jobs.get(job_id)
    assert job is not None and job.status == "done"
    assert (job.done, job.failed, job.dead) == (1, 3, 3)
    assert await jobs.group_records(job_id, 0, 4) == []  # no block for a group not judged


async def _run_worker(jobs: JobStore, job_id: str, engine: Engine) -> None:
    config = WorkerConfig(
        "w", 2, reclaim_idle_s=0.3, max_deliveries=2, reclaim_every_s=0.1, retry_backoff_s=0.05
    )
    try:
        await work_until_finished(Worker(engine, jobs, config), jobs, job_id, 30)
    finally:
        await engine.aclose()
