"""An entry changing hands at the worst moments, driven step by step against the real
stores: a takeover landing between a group write's WATCHed check of its holder and its
EXEC (the EXEC fails and nothing of the old holder stays), and a worker whose entry was
taken over releasing it late (the taker's delivery stays the taker's: not acknowledged,
not stopped, not queued again), for a group and for a single rollout."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from judge_service.jobs.model import Entry, GroupWrite, JobStore
from judge_service.jobs.parts import PART_BYTES
from judge_service.jobs.queue import RedisJobStore
from judge_service.schemas import Options
from judge_service.store.redis_store import RedisStore
from tests import test_jobs_groupwise_store as store_cases
from tests.redis_support import redis_job_store

GROUPWISE = Options(judge="rules", groupwise=True).model_dump_json(exclude_none=True)
PLAIN = Options(judge="rules").model_dump_json(exclude_none=True)
jobs = store_cases.jobs  # the fixture: each case against both stores


@pytest.fixture
async def two() -> AsyncIterator[tuple[RedisJobStore, RedisJobStore, Any]]:
    """Two workers' stores on one prefix (each its own connection) and a raw client."""
    async with redis_job_store() as a:
        store = RedisStore(a.conn.url, prefix=a.keys.prefix, cache_ttl_s=600)
        b = RedisJobStore(store.conn, ttl_s=600)
        raw = aioredis.Redis.from_url(a.conn.url, decode_responses=True)
        try:
            yield a, b, raw
        finally:
            await raw.aclose()
            await store.close()


async def group_job(jobs: JobStore) -> str:
    """r0..r2 one group (leader r0), r3 alone."""
    ids = [f"r{i}" for i in range(4)]
    payloads = [json.dumps({"rollout": {"id": i}}) for i in ids]
    payloads[0] = json.dumps({"rollout": {"id": "r0"}, "group": [0, 1, 2]})
    job_id, _ = await jobs.create("t", None, "fp", GROUPWISE, ids, payloads, {1: 0, 2: 0})
    return job_id


def results(by: str, long: bool = True) -> list[tuple[int, str]]:
    """A result per member, the leader's longer than a part (written in parts)."""
    pad = "x" * (2 * PART_BYTES + 17 if long else 8)
    return [
        (i, json.dumps({"id": f"r{i}", "by": by, "pad": pad if i == 0 else ""})) for i in range(3)
    ]


async def stored(raw: Any, prefix: str, job_id: str) -> dict[str, dict[str, str]]:
    """The job's result hashes as Redis holds them (values cut to their first 40 chars)."""
    out = {}
    for name in ("out", "prov", "parts", "nparts"):
        values = await raw.hgetall(f"{prefix}:job:{job_id}:{name}")
        out[name] = {k: v[:40] for k, v in values.items()}
    return out


@pytest.mark.redis
@pytest.mark.parametrize("at_call", [1, 2])
async def test_a_takeover_between_the_check_and_the_exec_writes_nothing(
    two: tuple[RedisJobStore, RedisJobStore, Any], at_call: int
) -> None:
    a, b, raw = two
    job_id = await group_job(a)
    leader, _ = await a.claim("A", 10, block_s=0.1)
    assert (await a.begin(leader, "A", 3)).kind == "go"
    calls: list[int] = []
    taken: list[Entry] = []

    async def take_over() -> None:
        # A has checked that it holds the group (WATCHed); its EXEC is not sent yet. B,
        # on its own connection, takes the entry from A (taken for dead) and begins it.
        calls.append(1)
        if len(calls) == at_call:
            (entry,) = await b.reclaim("B", min_idle_s=0.0, count=3)
            assert (await b.begin(entry, "B", 3)).kind == "go"
            taken.append(entry)

    a.before_exec = take_over
    # at_call 1: in A's first transaction; 2: after A's first transaction went through.
    assert await a.write_members(leader, "A", results("A")) == 0
    assert len(calls) == at_call and taken
    # The EXEC that saw the takeover wrote nothing; A's first transaction, when it went
    # through before the takeover, is hidden (the group runs under B) and untagged by B.
    left = await stored(raw, a.keys.prefix, job_id)
    if at_call == 1:
        assert left == {"out": {}, "prov": {}, "parts": {}, "nparts": {}}
    else:
        assert set(left["prov"].values()) <= {"A"} and left["parts"]
    assert await a.result_slice(job_id, 0, 3) == [None] * 3
    assert set((await raw.hgetall(f"{a.keys.prefix}:job:{job_id}:run")).values()) == {"B"}
    a.before_exec = None
    commit: list[GroupWrite] = [(i, None, "done") for i in range(3)]
    assert await a.finish_group(leader, commit, "{}", holder="A") == 0
    assert await b.write_members(taken[0], "B", results("B")) == 1
    assert await b.finish_group(taken[0], commit, "{}", holder="B") == 3
    assert await a.result_slice(job_id, 0, 3) == [r for _, r in results("B")]
    left = await stored(raw, a.keys.prefix, job_id)  # B's alone: 3 parts of r0
    assert '"by": "A"' not in json.dumps(left) and len(left["parts"]) == 3


async def test_a_stale_release_leaves_a_taken_over_group_to_its_taker(jobs: JobStore) -> None:
    job_id = await group_job(jobs)
    leader, _ = await jobs.claim("A", 10, block_s=0.1)
    assert (await jobs.begin(leader, "A", 3)).kind == "go"
    (taken,) = await jobs.reclaim("B", min_idle_s=0.0, count=3)
    assert (await jobs.begin(taken, "B", 3)).kind == "go"
    assert await jobs.write_members(taken, "B", results("B", long=False)) == 1
    # A was taken for dead; it comes back and stops, giving back what it thinks it holds.
    assert await jobs.release(leader, "A") is False
    assert await jobs.pending("B") == 1 and await jobs.pending("A") == 1  # A's: r3's
    record = await jobs.get(job_id)
    assert record is not None and record.running == 3  # still B's, in flight
    assert not await jobs.claim("C", 10, block_s=0.1)  # the group was not queued again
    commit: list[GroupWrite] = [(i, None, "done") for i in range(3)]
    assert await jobs.finish_group(taken, commit, "{}", holder="B") == 3
    assert await jobs.result_slice(job_id, 0, 3) == [r for _, r in results("B", long=False)]


async def test_a_stale_release_leaves_a_taken_over_rollout_to_its_taker(jobs: JobStore) -> None:
    job_id, _ = await jobs.create("t", None, "fp", PLAIN, ["r0"], ['{"rollout": {"id": "r0"}}'])
    (entry,) = await jobs.claim("A", 10, block_s=0.1)
    assert (await jobs.begin(entry, "A", 3)).kind == "go"
    (taken,) = await jobs.reclaim("B", min_idle_s=0.0, count=1)
    assert (await jobs.begin(taken, "B", 3)).attempts == 2
    assert await jobs.release(entry, "A") is False
    assert await jobs.pending("B") == 1  # B's delivery, not acknowledged
    record = await jobs.get(job_id)
    assert record is not None and record.running == 1
    assert not await jobs.claim("C", 10, block_s=0.1)  # and not queued again
    assert await jobs.finish(taken, '{"id": "r0", "by": "B"}', "done")
    record = await jobs.get(job_id)
    assert record is not None and record.status == "done" and record.done == 1
    # B's own release of a delivery it holds still works (a worker that stops).
    job_id, _ = await jobs.create("t", None, "fp", PLAIN, ["r1"], ['{"rollout": {"id": "r1"}}'])
    (mine,) = await jobs.claim("B", 10, block_s=0.1)
    await jobs.begin(mine, "B", 3)
    assert await jobs.release(mine, "B") is True
    (again,) = await jobs.claim("C", 10, block_s=0.1)
    assert again.index == 0 and (await jobs.begin(again, "C", 3)).attempts == 1
