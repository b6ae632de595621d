"""A poison rollout (one whose processing raises in the worker, not a judge fallback),
with the default settings (reclaim after 600 s, 3 deliveries): it is delivered again at
once, reaches the dead-letter list after 3 deliveries within seconds, and the rest of
its job finishes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from judge_service.config import Settings
from judge_service.jobs.queue import RedisJobStore
from judge_service.jobs.worker import Worker, WorkerConfig
from judge_service.metrics import REGISTRY
from judge_service.pipeline import Engine
from judge_service.schemas import Options
from judge_service.store.redis_store import RedisStore
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.harness.scripted.jobs import stored_payloads, work_until_finished
from tests.redis_support import drop_prefix, require_redis, unique_prefix

pytestmark = pytest.mark.redis

POISON_AT = 3


def _counter(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def test_a_poison_rollout_is_dead_lettered_in_seconds_and_the_rest_finish(
    bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    url, prefix = require_redis(), unique_prefix()
    settings = Settings(redis_url=url, redis_prefix=prefix, default_tokenizer=str(bpe_dir))
    assert settings.jobs_reclaim_idle_s == 600 and settings.jobs_max_deliveries == 3
    store = RedisStore(url, prefix=prefix, cache_ttl_s=600)
    jobs = RedisJobStore(store.conn, ttl_s=600)
    engine = Engine(settings, store=store)
    ids = [f"p-{i}" for i in range(8)]
    payloads = stored_payloads(bpe, ids)
    # A payload no worker can read (written by a broken or older producer): it raises in
    # the worker on every delivery.
    payloads[POISON_AT] = json.dumps({"advantage": None, "rollout": {"id": ids[POISON_AT]}})
    options = Options(judge="rules", deadline_s=30).model_dump_json(exclude_none=True)
    config = WorkerConfig(
        name="poison-w",
        concurrency=4,
        reclaim_idle_s=settings.jobs_reclaim_idle_s,
        max_deliveries=settings.jobs_max_deliveries,
        dead_after_s=settings.jobs_dead_after_s,
    )
    retries, dead_lettered = (
        _counter("judge_jobs_retries_total"),
        _counter("judge_jobs_dead_lettered_total"),
    )
    try:
        await jobs.ensure_queue()
        job_id, _ = await jobs.create("t", None, "fp", options, ids, payloads)
        began = time.monotonic()
        await work_until_finished(Worker(engine, jobs, config), jobs, job_id, 60)
        took = time.monotonic() - began
        record = await jobs.get(job_id)
        assert record is not None
        results = [json.loads(r or "null") for r in await jobs.result_slice(job_id, 0, 8)]
        dead = [json.loads(r) for r in await jobs.dead_letters()]
    finally:
        await engine.aclose()
        await store.close()
        drop_prefix(url, prefix)

    assert took < 15, took  # with a reclaim per redelivery it was 2 × 600 s
    assert [r["id"] for r in results] == ids
    poison = results[POISON_AT]
    assert poison["status"] == "failed"
    assert poison["error"].startswith("dead-letter: gave up after 3 deliveries; last error: ")
    assert "ValidationError" in poison["error"]
    assert all(r["status"] == "ok" for i, r in enumerate(results) if i != POISON_AT)
    (letter,) = dead
    assert (letter["job"], letter["index"], letter["attempts"]) == (job_id, POISON_AT, 3)
    assert record.status == "done" and (record.done, record.failed, record.dead) == (7, 1, 1)
    assert _counter("judge_jobs_retries_total") - retries == 3
    assert _counter("judge_jobs_dead_lettered_total") - dead_lettered == 1
