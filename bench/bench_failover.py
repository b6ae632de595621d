"""Benchmark of failover: SIGKILL of a worker to its rollouts taken over; Redis stalls
while a 100,000-rollout job is created and cancelled.

Takeover: with the default settings (JUDGE_JOBS_DEAD_AFTER_S=5, reclaim after 600 s), a
survivor worker and, per repeat, a victim worker (real ``judge-service worker``
processes, 4 slots each) judge a job against a scripted Anthropic server
(tests/harness/scripted, 200 ms per call, two calls per rollout). Once the
victim's judge sessions are under way it is SIGKILLed; timed: until none of its entries
is pending under its name (taken over), and until the job has every result. Target:
taken over in under 15 s.

Redis stalls: a separate process PINGs Redis every 2 ms while this one creates, then
cancels, a job of 100,000 rollouts (``RedisJobStore.create`` / ``cancel``, as ``POST
/v1/jobs`` and ``DELETE`` do); reported: the slowest PING round trip, and commands of
the job that Redis's slow log recorded (it keeps those over 10 ms).

    .venv/bin/python bench/bench_failover.py [--repeats 5] [--only takeover|redis]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
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

PINGER = """
import select, sys, time, redis
r = redis.Redis.from_url(sys.argv[1]); r.ping(); print('ready', flush=True)
times = []
while not select.select([sys.stdin], [], [], 0)[0]:
    t = time.perf_counter(); r.ping(); times.append(time.perf_counter() - t)
    time.sleep(0.002)
times.sort()
print(times[-1] * 1000, times[int(len(times) * 0.99)] * 1000, len(times), flush=True)
"""


def spawn_worker(name: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "judge_service", "worker", "--name", name],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def wait(check: Any, timeout: float, what: str, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(every)
    return value


def pending_of(client: redis.Redis, prefix: str, consumer: str) -> int:
    summary = client.xpending(f"{prefix}:queue", "judges")
    return sum(int(c["pending"]) for c in summary["consumers"] or [] if c["name"] == consumer)


def drop(url: str, prefix: str) -> None:
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    for start in range(0, len(keys), 500):
        client.unlink(*keys[start : start + 500])
    client.close()


async def submit(settings: Settings, rollouts: list[dict[str, Any]]) -> str:
    store = RedisStore(settings.redis_url or "", prefix=settings.redis_prefix, cache_ttl_s=3600)
    jobs = RedisJobStore(store.conn, ttl_s=3600)
    service = JobService(jobs, Engine(settings, tokenizers=TokenizerCache()), settings)
    body = JobRequestBody.model_validate(
        {"rollouts": rollouts, "options": {"judge": MODEL, "fallback": "zero"}}
    )
    job_id, _ = await service.submit("bench", body)
    await store.close()
    return job_id


def bench_takeover(url: str, repeats: int, per_job: int) -> list[tuple[float, float]]:
    work = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    tokenizer_dir = build_byte_level_bpe(work / "bpe")
    bpe = TokenizerCache().get(str(tokenizer_dir))
    server: FakeProviderServer = anthropic_server(delay_s=0.2)
    server.start()
    prefix = f"bench-fo-{uuid.uuid4().hex[:8]}"
    serving = worker_settings(
        server,
        redis_url=url,
        redis_prefix=prefix,
        worker_concurrency=4,
        default_tokenizer=str(tokenizer_dir),  # (allowed as the server's own tokenizer)
    )
    settings = Settings(**serving)
    assert settings.jobs_dead_after_s == 5 and settings.jobs_reclaim_idle_s == 600
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_")}
    env.update({f"JUDGE_{k.upper()}": str(v) for k, v in serving.items()})
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("ANTHROPIC_API_KEY", "bench-key")
    client = redis.Redis.from_url(url, decode_responses=True)
    survivor = spawn_worker("survivor", env, work / "survivor.log")
    live = f"{prefix}:workers"
    rows = []
    try:
        for n in range(repeats):
            victim_name = f"victim-{n}"
            victim = spawn_worker(victim_name, env, work / f"{victim_name}.log")
            wait(
                lambda v=victim_name: v in client.zrangebyscore(live, time.time() - 15, "+inf"),
                120,
                "the victim",
            )
            keys = [f"fo-{n}-{i}" for i in range(per_job)]
            rollouts = add_sessions(server, bpe, tokenizer_dir, keys)
            job_id = asyncio.run(submit(settings, rollouts))
            wait(
                lambda v=victim_name, last=keys[-1]: (
                    pending_of(client, prefix, v) >= 2
                    and server.book.attempts.get((last, 0)) is None
                ),
                60,
                "the victim to be judging",
                every=0.01,
            )
            time.sleep(0.3)  # its sessions' first calls are out
            victim.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            victim.wait()
            held = pending_of(client, prefix, victim_name)
            wait(
                lambda v=victim_name: pending_of(client, prefix, v) == 0,
                120,
                "the takeover",
                every=0.02,
            )
            taken = time.monotonic() - killed
            job = f"{prefix}:job:{job_id}"
            wait(lambda j=job: client.hget(j, "finished_at"), 300, "the job", every=0.05)
            finished = time.monotonic() - killed
            out = client.hlen(f"{job}:out")
            assert out == per_job, (out, per_job)
            print(
                f"repeat {n + 1}: victim held {held}; taken over after {taken:.2f} s; "
                f"job finished {finished:.2f} s after the kill",
                flush=True,
            )
            rows.append((taken, finished))
    finally:
        survivor.terminate()
        survivor.wait(timeout=60)
        client.close()
        server.stop()
        drop(url, prefix)
    return rows


def pinger(url: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", PINGER, url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


def pings(process: subprocess.Popen[str]) -> tuple[float, float, int]:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("stop\n")
    process.stdin.flush()
    worst, p99, count = process.stdout.readline().split()
    process.wait()
    return float(worst), float(p99), int(count)


async def bench_redis(url: str, rollouts: int) -> None:
    prefix = f"bench-fo-{uuid.uuid4().hex[:8]}"
    store = RedisStore(url, prefix=prefix, cache_ttl_s=3600)
    jobs = RedisJobStore(store.conn, ttl_s=3600)
    await jobs.ensure_queue()
    ids = [f"rollout-{i}" for i in range(rollouts)]
    payloads = [json.dumps({"rollout": {"id": i, "pad": "x" * 200}}) for i in ids]
    raw = redis.Redis.from_url(url)
    since = raw.time()[0]
    try:
        for step in ("create", "cancel"):
            process = pinger(url)
            began = time.perf_counter()
            if step == "create":
                job_id, _ = await jobs.create("bench", None, "fp", "{}", ids, payloads)
            else:
                await jobs.cancel(job_id)
            took = time.perf_counter() - began
            worst, p99, count = pings(process)
            print(
                f"{step} {rollouts} rollouts: {took:.2f} s; PING worst {worst:.1f} ms, "
                f"p99 {p99:.1f} ms ({count} pings)",
                flush=True,
            )
        slow = [
            (entry["duration"] / 1000, entry["command"][:40])
            for entry in raw.slowlog_get(128)
            if entry["start_time"] >= since and prefix.encode() in entry["command"]
        ]
        print(f"commands of the job in the slow log (over 10 ms): {len(slow)}", slow[:5])
    finally:
        raw.close()
        await store.close()
        drop(url, prefix)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--per-job", type=int, default=60, help="rollouts per takeover job")
    parser.add_argument("--rollouts", type=int, default=100_000, help="of the Redis-stall job")
    parser.add_argument("--only", choices=["takeover", "redis"])
    parser.add_argument(
        "--redis", default=os.environ.get("JUDGE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    args = parser.parse_args()
    if args.only != "redis":
        rows = bench_takeover(args.redis, args.repeats, args.per_job)
        taken = [t for t, _ in rows]
        print(
            f"taken over after SIGKILL: median {statistics.median(taken):.2f} s, "
            f"max {max(taken):.2f} s (target < 15 s)"
        )
    if args.only != "takeover":
        asyncio.run(bench_redis(args.redis, args.rollouts))


if __name__ == "__main__":
    main()
