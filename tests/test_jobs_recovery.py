"""Entries pending under a live worker's own name, which no other worker will ever take
(its heartbeat is fresh): those an earlier process of the same name left (a worker
restarted with the same --name, a container restarted with the same host name and pid),
and one whose claim reply was lost on the way. The worker finds and judges both."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import redis

from judge_service.config import Settings
from judge_service.errors import StoreUnavailable
from judge_service.jobs import failover
from judge_service.jobs.model import Claimed, Entry, Takeover
from judge_service.jobs.queue import RedisJobStore
from judge_service.jobs.worker import Worker, WorkerConfig
from judge_service.pipeline import Engine
from judge_service.schemas import Options
from judge_service.store.redis_store import RedisStore
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted.jobs import stored_payloads
from tests.redis_support import drop_prefix, require_redis, unique_prefix

pytestmark = pytest.mark.redis

OPTIONS = Options(judge="rules", deadline_s=30).model_dump_json(exclude_none=True)


@dataclass
class Setup:
    store: RedisStore
    jobs: RedisJobStore
    engine: Engine
    bpe: LoadedTokenizer


@pytest.fixture
async def setup(bpe: LoadedTokenizer, bpe_dir: Path) -> AsyncIterator[Setup]:
    url, prefix = require_redis(), unique_prefix()
    settings = Settings(redis_url=url, redis_prefix=prefix, default_tokenizer=str(bpe_dir))
    store = RedisStore(url, prefix=prefix, cache_ttl_s=600)
    jobs = RedisJobStore(store.conn, ttl_s=600)
    engine = Engine(settings, store=store)
    await jobs.ensure_queue()
    try:
        yield Setup(store, jobs, engine, bpe)
    finally:
        await engine.aclose()
        await store.close()
        drop_prefix(url, prefix)


async def _job(setup: Setup, n: int, tag: str) -> tuple[str, list[str]]:
    ids = [f"{tag}-{i}" for i in range(n)]
    job_id, _ = await setup.jobs.create(
        "t", None, "fp", OPTIONS, ids, stored_payloads(setup.bpe, ids)
    )
    return job_id, ids


def _config(name: str) -> WorkerConfig:
    return WorkerConfig(
        name=name, concurrency=2, reclaim_idle_s=600, max_deliveries=3, reclaim_every_s=0.5
    )


async def _run_until_finished(worker: Worker, setup: Setup, job_ids: list[str]) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        async with asyncio.timeout(30):
            for job_id in job_ids:
                while (record := await setup.jobs.get(job_id)) is None or not record.finished_at:
                    await asyncio.sleep(0.05)
    finally:
        stop.set()
        await task


async def test_adopt_returns_what_an_earlier_process_of_this_name_held(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(failover, "_MAX_CLAIM", 2)  # several pages
    jobs = setup.jobs
    await _job(setup, 5, "a")
    await jobs.heartbeat("w")
    held = await jobs.claim("w", 5, block_s=0.1)
    await jobs.heartbeat("w")  # the same name, alive again: nobody else takes them
    assert (await jobs.take_over("other", dead_after_s=5.0, count=10)).entries == []
    assert [e.id for e in await jobs.adopt("w")] == [e.id for e in held]
    assert await jobs.adopt("nobody") == []


async def test_a_restarted_worker_judges_what_its_earlier_process_held(setup: Setup) -> None:
    job_id, ids = await _job(setup, 4, "restart")
    await setup.jobs.heartbeat("w")
    assert len(await setup.jobs.claim("w", 3, block_s=0.1)) == 3  # then the process died

    await _run_until_finished(Worker(setup.engine, setup.jobs, _config("w")), setup, [job_id])

    results = [json.loads(r or "null") for r in await setup.jobs.result_slice(job_id, 0, 4)]
    assert [r["id"] for r in results] == ids and all(r["status"] == "ok" for r in results)
    assert await setup.jobs.pending() == 0


class LostReply(RedisJobStore):
    """The real queue, except that the first claim's reply is lost: Redis delivered the
    entries to this consumer, the worker never saw them."""

    lost: list[Entry]

    async def claim(
        self, consumer: str, count: int, block_s: float, cap: int | None = None
    ) -> Claimed:
        entries = await super().claim(consumer, count, block_s, cap)
        if entries and not hasattr(self, "lost"):
            self.lost = entries
            raise StoreUnavailable("connection reset while reading the reply")
        return entries


async def test_entries_whose_claim_reply_was_lost_are_judged(setup: Setup) -> None:
    job_id, ids = await _job(setup, 3, "lost")
    jobs = LostReply(setup.store.conn, ttl_s=600)

    await _run_until_finished(Worker(setup.engine, jobs, _config("w")), setup, [job_id])

    assert jobs.lost  # the failure happened, and still:
    results = [json.loads(r or "null") for r in await setup.jobs.result_slice(job_id, 0, 3)]
    assert [r["id"] for r in results] == ids and all(r["status"] == "ok" for r in results)
    assert await setup.jobs.pending() == 0


class Outage(RedisJobStore):
    """The real queue, except that this worker cannot reach Redis for its first heartbeats
    after starting (as after an outage: every heartbeat in Redis is stale)."""

    failing_until = 0.0
    last_failure = 0.0
    took_over_at: float | None = None

    async def heartbeat(self, consumer: str, external: bool = True) -> None:
        if time.monotonic() < self.failing_until and self.last_failure:
            self.last_failure = time.monotonic()
            raise StoreUnavailable("redis unavailable")
        self.last_failure = self.last_failure or -1.0  # the first beat, before claiming
        await super().heartbeat(consumer, external)

    async def take_over(
        self, consumer: str, dead_after_s: float, count: int, cap: int | None = None
    ) -> Takeover:
        taken = await super().take_over(consumer, dead_after_s, count, cap)
        if taken.entries and self.took_over_at is None:
            self.took_over_at = time.monotonic()
        return taken


@pytest.mark.slow
async def test_after_an_outage_no_one_is_declared_dead_until_heartbeats_had_time(
    setup: Setup,
) -> None:
    dead_after = 2.0
    job_id, _ = await _job(setup, 2, "outage")
    await setup.jobs.heartbeat("ghost")
    await setup.jobs.claim("ghost", 2, block_s=0.1)  # a dead worker's (or a slow one's)
    raw = redis.Redis.from_url(setup.jobs.conn.url, decode_responses=True)
    seconds, micros = raw.time()
    raw.zadd(setup.jobs.failover.beats, {"ghost": seconds * 1000 + micros // 1000 - 60_000})
    raw.close()
    jobs = Outage(setup.store.conn, ttl_s=600)
    jobs.failing_until = time.monotonic() + 1.5
    config = replace(_config("w"), dead_after_s=dead_after)

    await _run_until_finished(Worker(setup.engine, jobs, config), setup, [job_id])

    assert jobs.took_over_at is not None and jobs.last_failure > 0
    assert jobs.took_over_at - jobs.last_failure >= dead_after
