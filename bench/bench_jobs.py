"""Benchmark of jobs: one file of rollouts through 1, 2 and 4 worker processes, then again.

A scripted Anthropic server (tests/harness/scripted, in this process) answers
every call after 200 ms; each rollout is a two-call judge session (view_tokens, then
submit_spans), so a worker with C rollouts in flight judges about C / 0.4 s rollouts per
second and adding workers should add throughput. Each worker count gets its own Redis
key prefix (its own queue and cache). Targets: at least 1.8x from 1 to 2 workers and 3x
from 1 to 4. Then the same file is submitted again to the 4-worker deployment: every
rollout must be a cache hit, with zero provider calls.

Workers are real ``judge-service worker`` processes on the Redis at --redis (default
127.0.0.1:6379); the job is submitted through `JobService`, as ``POST /v1/jobs`` does.

    .venv/bin/python bench/bench_jobs.py [--rollouts 2000 --concurrency 8 --workers 1,2,4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from judge_service.config import Settings  # noqa: E402
from judge_service.jobs.queue import RedisJobStore  # noqa: E402
from judge_service.jobs.service import JobService  # noqa: E402
from judge_service.pipeline import Engine  # noqa: E402
from judge_service.schemas import JobRequestBody  # noqa: E402
from judge_service.store.redis_store import RedisStore  # noqa: E402
from judge_service.trace.tokenizer import TokenizerCache  # noqa: E402
from tests.harness.scripted import FakeProviderServer, anthropic_server  # noqa: E402
from tests.harness.scripted.jobs import MODEL, add_sessions, worker_settings  # noqa: E402
from tests.harness.tokenizers import build_byte_level_bpe  # noqa: E402

DELAY_S = 0.2


def start_workers(
    count: int, env: dict[str, str], logs: Path, tag: str
) -> list[subprocess.Popen[bytes]]:
    processes = []
    for i in range(count):
        with (logs / f"{tag}-w{i}.log").open("ab") as out:
            processes.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "judge_service",
                        "worker",
                        "--name",
                        f"{tag}-w{i}",
                        "--log-level",
                        "warning",
                    ],
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
    return processes


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop_workers(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


async def run_job(
    settings: Settings, rollouts: list[dict[str, Any]], options: dict[str, Any]
) -> tuple[float, list[dict[str, Any]]]:
    """Submit, wait for the job to finish; (seconds from submit to finish, results)."""
    store = RedisStore(settings.redis_url or "", prefix=settings.redis_prefix, cache_ttl_s=3600)
    jobs = RedisJobStore(store.conn, ttl_s=3600)
    service = JobService(jobs, Engine(settings, tokenizers=TokenizerCache()), settings)
    body = JobRequestBody.model_validate({"rollouts": rollouts, "options": options})
    began = time.perf_counter()
    job_id, _ = await service.submit("bench", body)
    while True:
        record = await jobs.get(job_id)
        assert record is not None
        if record.finished_at is not None:
            break
        await asyncio.sleep(0.1)
    elapsed = time.perf_counter() - began
    results = [json.loads(r or "{}") for r in await jobs.result_slice(job_id, 0, len(rollouts))]
    await store.close()
    return elapsed, results


def wait_for_workers(url: str, prefix: str, names: list[str], timeout: float = 120) -> None:
    client = redis.Redis.from_url(url, decode_responses=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = set(client.zrangebyscore(f"{prefix}:workers", time.time() - 15, "+inf"))
        if alive >= set(names):
            client.close()
            return
        time.sleep(0.2)
    raise RuntimeError(f"workers {names} did not start")


def drop(url: str, prefix: str) -> None:
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    for start in range(0, len(keys), 500):
        client.delete(*keys[start : start + 500])
    client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8, help="rollouts in flight per worker")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument(
        "--redis", default=os.environ.get("JUDGE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    os.environ.setdefault("ANTHROPIC_API_KEY", "bench-key")

    work = Path(tempfile.mkdtemp(prefix="bench-jobs-"))
    tokenizer_dir = build_byte_level_bpe(work / "bpe")
    from judge_service.trace.tokenizer import TokenizerCache as Cache

    bpe = Cache().get(str(tokenizer_dir))
    server: FakeProviderServer = anthropic_server(delay_s=DELAY_S)
    server.start()
    keys = [f"bench-{i}" for i in range(args.rollouts)]
    rollouts = add_sessions(server, bpe, tokenizer_dir, keys)
    options = {"judge": MODEL, "deadline_s": 120}
    rows: list[tuple[str, int, float, int]] = []
    try:
        for count in counts:
            prefix = f"bench-{uuid.uuid4().hex[:8]}"
            serving = worker_settings(
                server,
                redis_url=args.redis,
                redis_prefix=prefix,
                max_concurrency=args.concurrency,
                worker_concurrency=args.concurrency,
                tokenizer_roots=str(work),  # the rollouts name the tokenizer built there
            )
            env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_")}
            env.update({f"JUDGE_{k.upper()}": str(v) for k, v in serving.items()})
            env["PYTHONPATH"] = str(ROOT)
            names = [f"{prefix}-w{i}" for i in range(count)]
            workers = start_workers(count, env, work, prefix)
            try:
                wait_for_workers(args.redis, prefix, names)
                settings = Settings(**serving)
                # Warm up (tokenizer load, judge construction) on other content, untimed.
                warm = add_sessions(
                    server,
                    bpe,
                    tokenizer_dir,
                    [f"{prefix}-warm-{i}" for i in range(2 * args.concurrency * count)],
                )
                asyncio.run(run_job(settings, warm, options))
                calls_before = len(server.requests)
                cpu_before = sum(cpu_seconds(w.pid) for w in workers)
                self_before = time.process_time()
                elapsed, results = asyncio.run(run_job(settings, rollouts, options))
                calls = len(server.requests) - calls_before
                cpu = sum(cpu_seconds(w.pid) for w in workers) - cpu_before
                print(
                    f"  worker CPU {cpu:.1f} s, bench process CPU "
                    f"{time.process_time() - self_before:.1f} s",
                    flush=True,
                )
                assert [r["id"] for r in results] == keys
                bad = [r for r in results if r.get("status") != "ok"]
                assert not bad, bad[:3]
                rows.append((f"{count} worker{'s' if count > 1 else ''}", count, elapsed, calls))
                print(
                    f"{count} workers: {args.rollouts / elapsed:7.1f} rollouts/s "
                    f"({elapsed:.1f} s, {calls} provider calls)",
                    flush=True,
                )
                if count == counts[-1]:
                    calls_before = len(server.requests)
                    elapsed, results = asyncio.run(run_job(settings, rollouts, options))
                    calls = len(server.requests) - calls_before
                    hits = sum(r.get("cache") == "hit" for r in results)
                    assert hits == args.rollouts, f"{hits} cache hits"
                    rows.append((f"{count} workers, same file again", count, elapsed, calls))
                    print(
                        f"again: {args.rollouts / elapsed:7.1f} rollouts/s ({elapsed:.1f} s, "
                        f"{calls} provider calls, {hits} cache hits)",
                        flush=True,
                    )
            finally:
                stop_workers(workers)
                drop(args.redis, prefix)
    finally:
        server.stop()

    base = args.rollouts / rows[0][2]
    print(
        f"\n{args.rollouts} rollouts, {DELAY_S * 1000:.0f} ms per provider call, 2 calls per "
        f"session, {args.concurrency} rollouts in flight per worker, {os.cpu_count()} CPUs\n"
    )
    print("| run | wall s | rollouts/s | vs 1 worker | provider calls |")
    print("|---|---:|---:|---:|---:|")
    for name, _count, elapsed, calls in rows:
        rate = args.rollouts / elapsed
        print(f"| {name} | {elapsed:.1f} | {rate:.1f} | {rate / base:.2f}x | {calls} |")


if __name__ == "__main__":
    main()
