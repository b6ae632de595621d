"""Canaries and the drift state in Redis (issue 40): a malformed canary file is a settings
error naming its line; a canary run scores the bundled records apart from the judging
metrics and the cache; three real worker processes on one Redis run each canary period
once between them; worker processes judging a job write one window between them, each
its last partial chunk at SIGTERM, and the window and its baseline outlive them."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from judge_service_client.client import JudgeClient
from pydantic import ValidationError

from judge_service import metrics
from judge_service.api.app import create_app
from judge_service.config import Settings
from judge_service.drift.monitor import series_of
from judge_service.pipeline import Engine
from judge_service.schemas import Options, Rollout
from judge_service.store.memory import MemoryStore
from judge_service.store.redis_store import RedisStore
from tests.conftest import LiveServer
from tests.redis_support import (
    drop_prefix,
    require_redis,
    service_env,
    spawn,
    stop,
    unique_prefix,
    wait_until,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_a_malformed_canary_file_is_a_settings_error_naming_its_line(tmp_path: Path) -> None:
    good = (EXAMPLES / "processbench.jsonl").read_text(encoding="utf-8").splitlines()
    bad = tmp_path / "canaries.jsonl"
    broken = json.loads(good[1])
    broken["label"] = 99  # past its steps
    bad.write_text("\n".join([good[0], json.dumps(broken), "{not json"]) + "\n")
    with pytest.raises(ValidationError) as caught:
        Settings(drift_canary_files=str(bad))
    text = str(caught.value)
    assert "JUDGE_DRIFT_CANARY_FILES" in text and str(bad) in text
    assert "line 2.label" in text and "line 3: not JSON" in text
    missing = tmp_path / "absent.jsonl"
    with pytest.raises(ValidationError, match=r"absent\.jsonl: cannot read"):
        Settings(drift_canary_files=str(missing))
    # the bundled files are well formed and are the default
    assert Settings(drift_canary_interval_s=60).canary_files[0].name == "processbench.jsonl"


def _results(judge: str) -> float:
    total = 0.0
    for status in ("ok", "fallback", "failed"):
        value = metrics.REGISTRY.get_sample_value(
            "judge_results_total", {"judge": judge, "status": status}
        )
        total += value or 0.0
    return total


async def test_a_canary_run_scores_the_bundled_records_apart() -> None:
    settings = Settings(drift_canary_judges="rules")
    store = MemoryStore()
    engine = Engine(settings, store=store)
    assert engine.audit is not None
    before = _results("rules")
    try:
        run = await engine.audit.canaries.run(engine, "rules", "t1")
        again = await engine.audit.canaries.run(engine, "rules", "t2")
    finally:
        await engine.aclose()
    assert run["records"] == 28 and run["failed"] == 0
    assert run["processbench_f1"] is not None and run["span_f1"] is not None
    assert run["f1"] == again["f1"]  # the cache bypassed, the same records judged alike
    assert run["label_mix"].get("invalid", 0) > 0
    # kept out of the judging counters, the drift window and the cache
    assert _results("rules") == before
    assert engine.audit.verdicts == {} and await engine.audit.store.series() == []
    assert not store._judgments  # nothing cached
    runs = await engine.audit.store.read("canary|rules", "runs")
    assert [r["period"] for r in runs] == ["t1", "t2"]
    f1 = metrics.REGISTRY.get_sample_value(
        "judge_canary_f1", {"judge": "rules", "prompt_version": run["prompt_version"]}
    )
    assert f1 == run["f1"]


async def test_canaries_run_every_so_many_judgments(
    example_rollouts: list[dict[str, object]],
) -> None:
    settings = Settings(
        drift_chunk=10,
        drift_canary_every=25,
        drift_canary_judges="rules",
        drift_canary_max_records=4,
    )
    engine = Engine(settings, store=MemoryStore())
    assert engine.audit is not None
    rollouts = [Rollout.model_validate(r) for r in example_rollouts]
    try:
        for at in range(60):
            await engine.judge_one(rollouts[at % len(rollouts)], Options(use_cache=False))
        await engine.audit.drain()
        runs = await engine.audit.store.read("canary|rules", "runs")
    finally:
        await engine.aclose()
    # 60 judgments cross the marks 25 and 50 once each (the chunk that crosses runs it)
    assert sorted(r["period"] for r in runs) == ["k1", "k2"]
    assert all(r["records"] == 4 for r in runs)


async def test_a_store_that_is_down_never_fails_a_judgment(
    example_rollouts: list[dict[str, object]], caplog: pytest.LogCaptureFixture
) -> None:
    dead = RedisStore("redis://127.0.0.1:9/0", prefix="x", cache_ttl_s=60, timeout_s=0.2)
    engine = Engine(Settings(drift_chunk=5, drift_shadow_rate=1.0), store=dead)
    assert engine.audit is not None
    rollouts = [Rollout.model_validate(r) for r in example_rollouts]
    try:
        results = [await engine.judge_one(r, Options(use_cache=False)) for r in rollouts]
        await engine.audit.drain()
    finally:
        await engine.aclose()
    assert {r.status for r in results} == {"ok"}
    assert "drift: could not score" in caplog.text  # logged, dropped


@pytest.mark.redis
def test_workers_on_one_redis_run_each_canary_period_once(tmp_path: Path) -> None:
    url, prefix = require_redis(), unique_prefix()
    interval = 2
    env = service_env(
        redis_url=url,
        redis_prefix=prefix,
        drift_canary_interval_s=interval,
        drift_canary_judges="rules",
        drift_canary_max_records=8,
    )
    workers = [spawn(["worker", "--name", f"w{i}"], env, tmp_path / f"w{i}.log") for i in range(3)]
    client = redis.Redis.from_url(url, decode_responses=True)
    key = f"{prefix}:drift:canary|rules:runs"
    try:
        wait_until(lambda: client.llen(key) >= 3, 90, "three canary runs")
        time.sleep(interval)
    finally:
        for process in workers:
            stop(process)
        runs = [json.loads(item) for item in client.lrange(key, 0, -1)]
        client.close()
        drop_prefix(url, prefix)
    periods = [run["period"] for run in runs]
    assert len(periods) == len(set(periods)), periods  # no period judged twice
    assert all(run["records"] == 8 and run["failed"] == 0 for run in runs)
    logs = [(tmp_path / f"w{i}.log").read_text() for i in range(3)]
    assert not any("Traceback" in log for log in logs), logs


def _chunks(url: str, prefix: str) -> tuple[list[dict[str, Any]], str | None]:
    client = redis.Redis.from_url(url, decode_responses=True)
    try:
        (series,) = client.smembers(f"{prefix}:drift:series")
        chunks = [json.loads(c) for c in client.lrange(f"{prefix}:drift:{series}:chunks", 0, -1)]
        return chunks, client.get(f"{prefix}:drift:{series}:baseline")
    finally:
        client.close()


@pytest.mark.redis
def test_worker_processes_share_one_window_that_outlives_them(
    tmp_path: Path, example_rollouts: list[dict[str, object]]
) -> None:
    url, prefix = require_redis(), unique_prefix()
    drift = {"drift_window": 40, "drift_chunk": 10}
    env = service_env(redis_url=url, redis_prefix=prefix, tokenizer_roots=EXAMPLES, **drift)
    api = Settings(redis_url=url, redis_prefix=prefix, inprocess_worker="off", **drift)

    def batch(first: int, count: int) -> list[dict[str, object]]:
        rows = [example_rollouts[i % len(example_rollouts)] for i in range(first, first + count)]
        return [{**row, "id": f"r{first + i}"} for i, row in enumerate(rows)]

    def run_job(client: JudgeClient, rollouts: list[dict[str, object]], workers: int) -> None:
        names = [f"w{os.urandom(2).hex()}" for _ in range(workers)]
        started = [spawn(["worker", "--name", n], env, tmp_path / f"{n}.log") for n in names]
        try:
            job = client.submit_job(rollouts, {"use_cache": False})
            assert client.wait_job(job.id, timeout=120).status == "done"
        finally:
            for process in started:
                stop(process)  # SIGTERM: each writes its last, partial chunk
        assert all(p.returncode == 0 for p in started)

    try:
        with LiveServer(create_app(api)) as live, JudgeClient(live.url) as client:
            run_job(client, batch(0, 60), workers=2)
            chunks, baseline = _chunks(url, prefix)
            assert sum(c["n"] for c in chunks) == 60  # every judgment, from both processes
            assert baseline is not None and json.loads(baseline)["n"] >= 40
            run_job(client, batch(60, 20), workers=1)  # a new process, after a restart
            chunks, after = _chunks(url, prefix)
            assert sum(c["n"] for c in chunks) == 80 and after == baseline
            (judge,) = client.drift().judges
            assert judge.judge == "rules" and judge.window_judgments >= 40
            assert judge.baseline_judgments == json.loads(baseline)["n"]
    finally:
        drop_prefix(url, prefix)


@pytest.mark.redis
async def test_the_window_and_baseline_survive_a_restart(
    example_rollouts: list[dict[str, object]],
) -> None:
    url, prefix = require_redis(), unique_prefix()
    settings = Settings(redis_url=url, redis_prefix=prefix, drift_window=20, drift_chunk=10)
    rollouts = [Rollout.model_validate(r) for r in example_rollouts]
    options = Options(use_cache=False)

    async def judge(count: int) -> tuple[str, str, int]:
        engine = Engine(settings, store=RedisStore(url, prefix=prefix, cache_ttl_s=60))
        assert engine.audit is not None
        try:
            for at in range(count):
                await engine.judge_one(rollouts[at % len(rollouts)], options)
            await engine.audit.drain()
            series = series_of("open", "rules", engine.judge_for("rules").prompt_version)
            verdict = engine.audit.verdicts[series]
            chunks = await engine.audit.store.read(series, "chunks")
        finally:
            await engine.aclose()
        return verdict.verdict, verdict.reason, sum(c["n"] for c in chunks)

    try:
        _, reason, held = await judge(10)
        assert reason.startswith("collecting the baseline") and held == 10
        _, reason, held = await judge(10)  # a new process: the first ten are still there
        assert not reason.startswith("collecting"), reason
        assert held == 20
    finally:
        drop_prefix(url, prefix)
