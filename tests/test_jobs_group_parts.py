"""A group's long results on the real Redis: stored in parts no longer than
`jobs.parts.PART_BYTES`, written in transactions of at most `CALL_BYTES`, read back whole
on a results page; and no part outlives its result: a takeover, a release, a cancel and a
dead letter drop them, and every key a finished job leaves expires with it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from judge_service.jobs.model import CANCELLED, GroupWrite
from judge_service.jobs.parts import CALL_BYTES, PART_BYTES, batches
from judge_service.jobs.queue import RedisJobStore
from tests.redis_support import redis_job_store
from tests.test_jobs_handover import group_job

pytestmark = pytest.mark.redis
COMMIT: list[GroupWrite] = [(i, None, "done") for i in range(3)]


@pytest.fixture
async def jobs() -> AsyncIterator[tuple[RedisJobStore, Any]]:
    async with redis_job_store() as queue:
        raw = aioredis.Redis.from_url(queue.conn.url, decode_responses=True)
        try:
            yield queue, raw
        finally:
            await raw.aclose()


def long_results(by: str) -> list[tuple[int, str]]:
    """r0 about 2.5 parts long, r1 exactly one part, r2 short (JSON, as a worker writes)."""
    sizes = (2 * PART_BYTES + PART_BYTES // 2, PART_BYTES - 40, 10)
    return [(i, json.dumps({"id": f"r{i}", "by": by, "pad": "y" * n})) for i, n in enumerate(sizes)]


async def lengths(raw: Any, key: str) -> dict[str, int]:
    return {f: await raw.hstrlen(key, f) for f in await raw.hkeys(key)}


async def started(jobs: RedisJobStore, by: str) -> tuple[str, Any, Any]:
    """A group job (`group_job`) whose group `by` began and wrote provisionally; the
    leader's entry and the single rollout's, both claimed by `by`."""
    job_id = await group_job(jobs)
    leader, alone = await jobs.claim(by, 10, block_s=0.1)
    assert (await jobs.begin(leader, by, 3)).kind == "go"
    assert await jobs.write_members(leader, by, long_results(by)) == 1
    return job_id, leader, alone


def key(jobs: RedisJobStore, job_id: str, part: str) -> str:
    return jobs.keys.job(job_id, part)


def test_writes_are_cut_into_bounded_transactions() -> None:
    writes = long_results("w")
    cut = batches(writes)
    assert all(b.size <= CALL_BYTES for b in cut)
    assert all(len(v) <= PART_BYTES for b in cut for v in (*b.parts.values(), *b.out.values()))
    joined = "".join(v for b in cut for k, v in b.parts.items() if k.startswith("0."))
    assert joined == writes[0][1]
    # Each result is tagged once, in the transaction of its last part (or itself).
    assert sorted(i for b in cut for i in b.tagged) == ["0", "1", "2"]


async def test_a_long_result_is_stored_in_parts_and_read_back_whole(
    jobs: tuple[RedisJobStore, Any],
) -> None:
    store, raw = jobs
    job_id, leader, alone = await started(store, "w")
    assert max((await lengths(raw, key(store, job_id, "out"))).values()) <= PART_BYTES
    parts = await lengths(raw, key(store, job_id, "parts"))
    assert sorted(parts) == ["0.0", "0.1", "0.2"] and max(parts.values()) <= PART_BYTES
    assert await store.result_slice(job_id, 0, 3) == [None] * 3  # provisional: not shown
    assert await store.finish_group(leader, COMMIT, "{}", holder="w") == 3
    assert await store.result_slice(job_id, 0, 3) == [r for _, r in long_results("w")]
    assert await store.result_slice(job_id, 1, 2) == [r for _, r in long_results("w")[1:]]
    # A single rollout's result (FINISH) is read back as it was written.
    await store.begin(alone, "w", 3)
    await store.finish(alone, '{"id": "r3"}', "done")
    assert (await store.result_slice(job_id, 0, 4))[3] == '{"id": "r3"}'


async def test_a_taker_and_a_release_drop_the_earlier_parts(
    jobs: tuple[RedisJobStore, Any],
) -> None:
    store, raw = jobs
    job_id, leader, _ = await started(store, "a")
    assert await raw.hlen(key(store, job_id, "parts")) == 3  # a's r0, in parts
    (taken,) = await store.reclaim("b", min_idle_s=0.0, count=3)
    await store.begin(taken, "b", 3)  # a judging of its own, which replaces a's
    short = [(i, json.dumps({"id": f"r{i}"})) for i in range(3)]  # b's results are short
    assert await store.write_members(taken, "b", short) == 1
    for part in ("parts", "nparts"):  # a's parts went with the results replacing them
        assert await raw.hlen(key(store, job_id, part)) == 0, part
    assert await store.finish_group(taken, COMMIT, "{}", holder="b") == 3
    assert await store.result_slice(job_id, 0, 3) == [r for _, r in short]

    job_id, leader, _ = await started(store, "c")
    assert await raw.hlen(key(store, job_id, "parts")) == 3
    assert await store.release(leader, "c")
    for part in ("out", "prov", "parts", "nparts"):
        assert await raw.hlen(key(store, job_id, part)) == 0, part


async def test_a_shorter_result_drops_the_parts_it_does_not_overwrite(
    jobs: tuple[RedisJobStore, Any],
) -> None:
    store, raw = jobs
    short = [(i, json.dumps({"id": f"r{i}"})) for i in range(3)]
    job_id, _, _ = await started(store, "d")
    (taken,) = await store.reclaim("e", min_idle_s=0.0, count=3)
    await store.begin(taken, "e", 3)
    shorter = [(0, json.dumps({"id": "r0", "pad": "z" * (PART_BYTES + 5)}))]
    assert await store.write_members(taken, "e", [*shorter, *short[1:]]) == 1
    assert sorted(await raw.hkeys(key(store, job_id, "parts"))) == ["0.0", "0.1"]
    assert await raw.hgetall(key(store, job_id, "nparts")) == {"0": "2"}
    assert await store.finish_group(taken, COMMIT, "{}", holder="e") == 3
    assert (await store.result_slice(job_id, 0, 1))[0] == shorter[0][1]


async def test_a_cancel_and_a_dead_letter_leave_no_part(
    jobs: tuple[RedisJobStore, Any],
) -> None:
    store, raw = jobs
    job_id, leader, _ = await started(store, "ghost")  # and then its worker died
    assert await raw.hlen(key(store, job_id, "parts")) == 3  # r0's, in parts
    await store.cancel(job_id)
    (taken,) = await store.reclaim("next", min_idle_s=0.0, count=3)
    assert (await store.begin(taken, "next", 3)).kind == "cancelled"
    cancelled: list[GroupWrite] = [(i, CANCELLED, "cancelled") for i in range(3)]
    assert await store.finish_group(taken, cancelled) == 3
    assert await store.result_slice(job_id, 0, 4) == [CANCELLED] * 4
    assert (
        await raw.hlen(key(store, job_id, "parts"))
        == await raw.hlen(key(store, job_id, "nparts"))
        == 0
    )

    job_id, leader, _ = await started(store, "poison")
    assert await raw.hlen(key(store, job_id, "parts")) == 3
    dead: list[GroupWrite] = [(i, json.dumps({"id": f"r{i}", "dead": 1}), "dead") for i in range(3)]
    assert await store.finish_group(leader, dead, dead_record="{}") == 3
    assert (
        await raw.hlen(key(store, job_id, "parts"))
        == await raw.hlen(key(store, job_id, "nparts"))
        == 0
    )
    assert [json.loads(r or "")["dead"] for r in await store.result_slice(job_id, 0, 3)] == [1] * 3


async def test_every_key_of_a_finished_job_expires_with_it(
    jobs: tuple[RedisJobStore, Any],
) -> None:
    store, raw = jobs
    job_id, leader, alone = await started(store, "w")
    assert await store.finish_group(leader, COMMIT, "{}", holder="w") == 3
    await store.begin(alone, "w", 3)
    await store.finish(alone, '{"id": "r3"}', "done")
    record = await store.get(job_id)
    assert record is not None and record.status == "done"
    left = [k async for k in raw.scan_iter(match=f"{store.keys.job(job_id)}*")]
    assert key(store, job_id, "parts") in left  # the results' parts stay with the results
    job_ttl = await raw.ttl(store.keys.job(job_id))
    for name in left:
        assert 0 < await raw.ttl(name) <= job_ttl, name  # none without an expiry
