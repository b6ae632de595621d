"""Workers against real Redis and a scripted provider: a redelivered rollout reuses the
cached judgment (no second session), a rollout that keeps failing is dead-lettered with its
last error, a stopping worker gives its rollouts back at once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from judge_service.config import Settings
from judge_service.jobs.model import Entry, FinishKind
from judge_service.jobs.queue import RedisJobStore
from judge_service.jobs.service import JobService
from judge_service.jobs.worker import Worker, WorkerConfig
from judge_service.judges.llm.ratelimit import reset_shared_limiters
from judge_service.pipeline import Engine
from judge_service.schemas import JobRequestBody
from judge_service.store.redis_store import RedisStore
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted import FakeProviderServer, Hang, anthropic_server
from tests.harness.scripted.jobs import MODEL, add_sessions, sessions, worker_settings
from tests.redis_support import drop_prefix, require_redis, unique_prefix

pytestmark = pytest.mark.redis


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    reset_shared_limiters()
    yield
    reset_shared_limiters()


@pytest.fixture(scope="module")
def server() -> Iterator[FakeProviderServer]:
    with anthropic_server() as fake:
        yield fake


@dataclass
class Setup:
    settings: Settings
    store: RedisStore
    jobs: RedisJobStore
    service: JobService
    engine: Engine


@pytest.fixture
async def setup(server: FakeProviderServer) -> AsyncIterator[Setup]:
    url, prefix = require_redis(), unique_prefix()
    settings = Settings(
        **worker_settings(server, redis_url=url, redis_prefix=prefix),
        jobs_max_deadline_s=5,
        jobs_reclaim_idle_s=6,
    )
    store = RedisStore(url, prefix=prefix, cache_ttl_s=600)
    jobs = RedisJobStore(store.conn, ttl_s=600)
    engine = Engine(settings, store=store)
    try:
        yield Setup(settings, store, jobs, JobService(jobs, engine, settings), engine)
    finally:
        await engine.aclose()
        await store.close()
        drop_prefix(url, prefix)


class FlakyFinish(RedisJobStore):
    """The real queue, except that writing a result fails `failures` times first (the worker
    judged the rollout, then lost its connection before the result was written)."""

    def __init__(self, store: RedisStore, failures: int) -> None:
        super().__init__(store.conn, ttl_s=600)
        self.failures = failures

    async def finish(
        self,
        entry: Entry,
        result: str,
        kind: FinishKind,
        dead_record: str | None = None,
        *,
        keep_payload: bool = False,
    ) -> bool:
        if kind != "dead" and self.failures > 0:
            self.failures -= 1
            raise RuntimeError("connection lost while writing the result")
        return await super().finish(entry, result, kind, dead_record, keep_payload=keep_payload)


def _config(name: str, **extra: Any) -> WorkerConfig:
    values: dict[str, Any] = {
        "name": name,
        "concurrency": 2,
        "reclaim_idle_s": 0.3,
        "max_deliveries": 2,
        "reclaim_every_s": 0.1,
        "drain_s": 5.0,
        **extra,
    }
    return WorkerConfig(**values)


async def _submit(setup: Setup, rollouts: list[dict[str, Any]]) -> str:
    body = JobRequestBody.model_validate(
        {"rollouts": rollouts, "options": {"judge": MODEL, "deadline_s": 5}}
    )
    job_id, _ = await setup.service.submit("t", body)
    return job_id


async def _run_until(worker: Worker, done: Any, timeout: float = 15.0) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        async with asyncio.timeout(timeout):
            while not await done():
                await asyncio.sleep(0.05)
    finally:
        stop.set()
        await task


async def _finished(setup: Setup, job_id: str) -> bool:
    record = await setup.jobs.get(job_id)
    return record is not None and record.finished_at is not None


async def test_a_redelivered_rollout_reuses_the_cached_judgment(
    setup: Setup, server: FakeProviderServer, bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    rollouts = add_sessions(server, bpe, bpe_dir, ["redeliver-0"])
    job_id = await _submit(setup, rollouts)
    worker = Worker(setup.engine, FlakyFinish(setup.store, failures=1), _config("w"))

    await _run_until(worker, lambda: _finished(setup, job_id))

    assert sessions(server)["redeliver-0"] == 1  # judged once, although delivered twice
    (stored,) = await setup.jobs.result_slice(job_id, 0, 1)
    result = json.loads(stored or "")
    assert result["status"] == "ok" and result["cache"] == "hit" and result["spans"]
    record = await setup.jobs.get(job_id)
    assert record is not None and record.status == "done" and record.done == 1
    assert await setup.jobs.pending() == 0


async def test_a_rollout_that_keeps_failing_goes_to_the_dead_letter_list(
    setup: Setup, server: FakeProviderServer, bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    rollouts = add_sessions(server, bpe, bpe_dir, ["poison-0"])
    job_id = await _submit(setup, rollouts)
    worker = Worker(setup.engine, FlakyFinish(setup.store, failures=99), _config("w"))

    await _run_until(worker, lambda: _finished(setup, job_id))

    (stored,) = await setup.jobs.result_slice(job_id, 0, 1)
    result = json.loads(stored or "")
    assert result["id"] == "poison-0" and result["status"] == "failed"
    assert result["error"] == (
        "dead-letter: gave up after 2 deliveries; last error: "
        "RuntimeError: connection lost while writing the result"
    )
    (record,) = [json.loads(r) for r in await setup.jobs.dead_letters()]
    assert record["job"] == job_id and record["index"] == 0 and record["attempts"] == 2
    assert record["last_error"] == "RuntimeError: connection lost while writing the result"
    view = await setup.jobs.get(job_id)
    assert view is not None and view.status == "failed" and view.dead == 1
    assert sessions(server)["poison-0"] == 1  # the second delivery was a cache hit


async def test_a_stopping_worker_gives_its_rollouts_back_for_another_to_finish(
    setup: Setup, server: FakeProviderServer, bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    rollouts = add_sessions(server, bpe, bpe_dir, ["handover-0"])
    server.book.add(
        "handover-0",
        [Hang(1.0), *server.book.scripts["handover-0"].steps[:1]],
        *server.book.scripts["handover-0"].steps[1:],
    )
    job_id = await _submit(setup, rollouts)
    slow = Worker(setup.engine, setup.jobs, _config("slow", drain_s=0.1, reclaim_idle_s=60))
    stop = asyncio.Event()
    task = asyncio.create_task(slow.run(stop))
    while not slow.in_flight:
        await asyncio.sleep(0.02)
    stop.set()
    await task
    assert await setup.jobs.pending() == 0  # released, not left for the reclaim time

    fast = Worker(setup.engine, setup.jobs, _config("fast", reclaim_idle_s=60))
    await _run_until(fast, lambda: _finished(setup, job_id))
    (stored,) = await setup.jobs.result_slice(job_id, 0, 1)
    assert json.loads(stored or "")["status"] == "ok"
