"""Groupwise jobs (options.groupwise): one queue entry per group, the group judged whole by
one worker, results as `/v1/judge/group` gives them; a bad group refused at submission; a
worker SIGKILLed mid-group loses nothing (its group is judged again whole by another).
Real Redis, real worker processes, the real SDK against a scripted provider."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from judge_service.api.app import create_app
from judge_service.config import Settings
from judge_service.group.judge import judge_group
from judge_service.jobs.queue import RedisJobStore
from judge_service.jobs.service import JobService
from judge_service.jobs.worker import Worker, WorkerConfig
from judge_service.pipeline import Engine
from judge_service.schemas import JobRequestBody, Options, Result, Rollout
from judge_service.store.redis_store import RedisStore
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.conftest import LiveServer
from tests.harness.scripted import FakeProviderServer, anthropic_server, call, submit
from tests.harness.scripted.harness import TRACE_TEXT, valid_spans
from tests.harness.scripted.jobs import MODEL, sessions, worker_settings
from tests.redis_support import (
    all_results,
    drop_prefix,
    pending_of,
    require_redis,
    service_env,
    shared_redis,
    start_job_and_wait_busy,
    unique_prefix,
    wait_job,
    worker_processes,
)
from tests.test_group_route import FALSE_AT_3, RIGHT, WRONG_PLAN
from tests.test_group_route import rollout as route_rollout

pytestmark = pytest.mark.redis


def mixed(bpe: LoadedTokenizer) -> list[dict[str, Any]]:
    """Two groups interleaved with a rollout alone: g (right, false, plan), h (two)."""
    in_g = (("right", RIGHT, 1.0), ("false", FALSE_AT_3, 0.0), ("plan", WRONG_PLAN, 0.0))
    in_h = (("right", RIGHT, 1.0), ("false", FALSE_AT_3, 1.0))
    g = [route_rollout(bpe, f"g-{n}", lines, r) for n, lines, r in in_g]
    h = [{**route_rollout(bpe, f"h-{n}", lines, r), "group_id": "h"} for n, lines, r in in_h]
    alone = {**route_rollout(bpe, "alone", RIGHT, 1.0), "group_id": None}
    return [g[0], h[0], g[1], alone, h[1], g[2]]


def comparable(result: dict[str, Any]) -> tuple[Any, ...]:
    same = Result.model_validate(result).model_dump(mode="json")  # stored JSON omits nulls
    return (same["id"], same["status"], same["spans"], same["credit"])


async def test_a_groupwise_job_queues_one_entry_per_group_and_matches_the_group_route(
    bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    url, prefix = require_redis(), unique_prefix()
    settings = Settings(
        redis_url=url, redis_prefix=prefix, default_tokenizer=str(bpe_dir), max_group_size=6
    )
    store = RedisStore(url, prefix=prefix, cache_ttl_s=600)
    jobs = RedisJobStore(store.conn, ttl_s=600)
    engine = Engine(settings, store=store)
    rows = mixed(bpe)
    options = {"judge": "rules", "groupwise": True, "credit_encoding": "dense"}
    try:
        body = JobRequestBody.model_validate({"rollouts": rows, "options": options})
        job_id, _ = await JobService(jobs, engine, settings).submit("t", body)
        queued = redis.Redis.from_url(url)
        entries = [int(fields[b"i"]) for _, fields in queued.xrange(f"{prefix}:queue") if fields]
        assert entries == [0, 1, 3]  # the leaders of g and h, and the rollout alone
        worker = Worker(engine, jobs, WorkerConfig("gw", 2, 30.0, 3, reclaim_every_s=0.1))
        halt = asyncio.Event()
        task = asyncio.create_task(worker.run(halt))
        async with asyncio.timeout(60):
            while (record := await jobs.get(job_id)) is None or record.finished_at is None:
                await asyncio.sleep(0.05)
        halt.set()
        await task
        stored = [json.loads(s or "") for s in await jobs.result_slice(job_id, 0, len(rows))]
        assert worker.judged == len(rows)
        expected: dict[str, dict[str, Any]] = {}
        for group_id in ("g", "h"):
            members = [Rollout.model_validate(r) for r in rows if r["group_id"] == group_id]
            answer = await judge_group(engine, members, Options.model_validate(options))
            expected |= {r.id: r.model_dump(mode="json") for r in answer.results}
        alone = Rollout.model_validate(rows[3])
        single = Options(judge="rules", credit_encoding="dense")
        expected["alone"] = (await engine.judge_one(alone, single)).model_dump(mode="json")
        for got in stored:
            assert comparable(got) == comparable(expected[got["id"]]), got["id"]
        assert [r["id"] for r in stored] == [r["id"] for r in rows]
        # The group's departure point is in its job result: g-false has its invalid step.
        assert any(s["label"] == "invalid" for s in stored[2]["spans"])
        queued.close()
    finally:
        await engine.aclose()
        await store.close()
        drop_prefix(url, prefix)


def test_a_bad_group_is_refused_and_a_good_one_judged_in_process(
    bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    rows = mixed(bpe)
    rows[4] = {**rows[4], "problem": "Another problem."}  # h's second rollout
    larger = [*mixed(bpe), {**mixed(bpe)[0], "id": "g-4"}]  # g: 4 rollouts
    settings = Settings(default_tokenizer=str(bpe_dir), max_group_size=3)
    groupwise = {"groupwise": True}
    with LiveServer(create_app(settings)) as live, httpx.Client(base_url=live.url) as client:
        bad = client.post("/v1/jobs", json={"rollouts": rows, "options": groupwise})
        big = client.post("/v1/jobs", json={"rollouts": larger, "options": groupwise})
        plain = client.post("/v1/jobs", json={"rollouts": rows})  # not groupwise: fine
        good = client.post("/v1/jobs", json={"rollouts": mixed(bpe), "options": groupwise})
        assert good.status_code == 202, good.text
        view = wait_job(client, good.json()["id"], timeout=60)  # the in-process queue
        results = all_results(client, good.json()["id"])
    assert bad.status_code == 422 and bad.json()["field"] == "rollouts[4].problem", bad.text
    assert big.status_code == 413 and big.json()["field"] == "rollouts", big.text
    assert plain.status_code == 202
    assert view["status"] == "done" and [r["id"] for r in results] == [r["id"] for r in mixed(bpe)]
    # g-plan's departure ("Only the 20 matters here.") is found only by judging g together.
    assert any(s["label"] == "invalid" for s in results[5]["spans"]), results[5]["spans"]


GROUPS, SIZE = 30, 4
DEADLINE_S, RECLAIM_S = 8, 9


@pytest.fixture
def provider() -> Iterator[FakeProviderServer]:
    with anthropic_server(delay_s=0.2) as fake:
        yield fake


@pytest.mark.slow
def test_a_group_job_survives_a_sigkilled_worker(
    provider: FakeProviderServer,
    bpe: LoadedTokenizer,
    bpe_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    spans = valid_spans(bpe.decode(bpe.hf.encode(TRACE_TEXT, add_special_tokens=False)))
    rows, keys = [], []
    for g in range(GROUPS):
        key = f"gkill-{g}"
        keys.append(key)
        # Rollout 0 holds the spans' tokens, and its siblings share them as a prefix.
        provider.book.add(
            key,
            call("view_tokens", rollout=0, start=0, end=16),
            submit([{"rollout": 0, **s} for s in spans]),
        )
        for m in range(SIZE):
            text = TRACE_TEXT + f"\nChecked once more ({m})."
            rows.append({
                "id": f"{key}-{m}", "group_id": key, "problem": f"Compute 17 × 24. SCRIPT:{key}",
                "response_token_ids": bpe.hf.encode(text, add_special_tokens=False),
                "tokenizer": str(bpe_dir), "reward": 1.0, "reference_answer": "408",
            })  # fmt: skip
    with shared_redis() as (url, prefix):
        serving = worker_settings(
            provider,
            redis_url=url,
            redis_prefix=prefix,
            jobs_max_deadline_s=DEADLINE_S,
            jobs_reclaim_idle_s=RECLAIM_S,
            default_tokenizer=str(bpe_dir),
        )
        env = service_env(**serving, worker_concurrency=2)
        names = ["gkill-w0", "gkill-w1", "gkill-w2"]
        api = Settings(**serving, inprocess_worker="off")
        with (
            worker_processes(names, env, tmp_path, url, prefix) as workers,
            LiveServer(create_app(api)) as live,
            httpx.Client(base_url=live.url, timeout=30) as client,
        ):
            options = {"judge": MODEL, "deadline_s": DEADLINE_S, "fallback": "none",
                       "groupwise": True}  # fmt: skip
            body = {"rollouts": rows, "options": options}
            job_id = start_job_and_wait_busy(client, body, url, prefix, "gkill-w0", SIZE)
            workers[0].send_signal(signal.SIGKILL)
            workers[0].wait(timeout=10)
            in_flight = pending_of(url, prefix, "gkill-w0")  # groups, one entry each
            view = wait_job(client, job_id, timeout=120)
            results = all_results(client, job_id, limit=16)
        logs = "\n".join(p.read_text() for p in tmp_path.glob("*.log"))

    assert in_flight > 0
    assert view["status"] == "done", logs
    assert view["counts"]["done"] == GROUPS * SIZE and view["counts"]["failed"] == 0
    assert [r["id"] for r in results] == [r["id"] for r in rows]  # one each, in order
    assert all(r["status"] == "ok" and r["spans"] for r in results), logs
    # The spans given to rollout 0 lie in the prefix every sibling shares: all hold them.
    for g in range(GROUPS):
        group = results[g * SIZE : (g + 1) * SIZE]
        assert len({json.dumps(r["spans"]) for r in group}) == 1
    # One session per group (never one per rollout); a group whose worker died had at
    # most one more, by whoever took its entry over.
    per_group = sessions(provider)
    assert set(per_group) == set(keys)
    assert GROUPS <= sum(per_group.values()) <= GROUPS + in_flight
    assert max(per_group.values()) <= 2
