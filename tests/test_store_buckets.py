"""The provider limiter's token bucket in Redis: two processes together get one quota;
without Redis each process falls back to its own buckets."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from judge_service.config import Settings
from judge_service.judges.llm import ratelimit
from judge_service.judges.llm.judge import build_llm_judge
from judge_service.store.buckets import RedisBuckets
from judge_service.store.redis_conn import RedisConnection
from tests.redis_support import ROOT, free_port, shared_redis

# One process: a limiter at 600 rpm (10/s, a bucket of 100) taking 60 requests. It says
# "ready" once imported and connected, then starts at the wall-clock time read from stdin:
# a start fixed in advance was missed by a process that imported slowly on a loaded machine.
CLIENT = """
import asyncio, sys, time
from judge_service.judges.llm.ratelimit import RateLimiter
from judge_service.store.buckets import RedisBuckets
from judge_service.store.redis_conn import RedisConnection

async def main():
    conn = RedisConnection(sys.argv[1], sys.argv[2])
    limiter = RateLimiter(rpm=600, shared=RedisBuckets(conn), name="anthropic:m:x")
    await conn.run(lambda r: r.ping())
    print("ready", flush=True)
    start_at = float(sys.stdin.readline())
    await asyncio.sleep(start_at - time.time())  # both start together
    began = time.monotonic()
    for _ in range(60):
        await limiter.acquire(1)
    print(time.monotonic() - began)
    await conn.close()

asyncio.run(main())
"""


def test_two_processes_share_one_provider_quota() -> None:
    with shared_redis() as (url, prefix):
        command = [sys.executable, "-c", CLIENT, url, prefix]
        processes = [
            subprocess.Popen(
                command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            for _ in range(2)
        ]
        for process in processes:
            assert process.stdout is not None and process.stdout.readline() == "ready\n"
        start_at = time.time() + 0.5
        for process in processes:  # both told before either is waited on
            assert process.stdin is not None
            process.stdin.write(f"{start_at}\n")
            process.stdin.flush()
        elapsed = [float(p.communicate(timeout=60)[0]) for p in processes]
    # 120 requests against a bucket of 100 refilled at 10/s: the last 20 wait ~2 s. Each
    # process alone (60 < 100) would not have waited at all.
    assert max(elapsed) >= 1.5, elapsed
    assert max(elapsed) < 8.0, elapsed


async def test_a_limiter_falls_back_to_its_own_buckets_without_redis() -> None:
    conn = RedisConnection(f"redis://127.0.0.1:{free_port()}/0", "x")
    limiter = ratelimit.RateLimiter(rpm=60, shared=RedisBuckets(conn), name="p:m:x")
    began = time.monotonic()
    for _ in range(10):  # the local bucket holds 10 s of 1/s
        await limiter.acquire(1)
    assert time.monotonic() - began < 1.0
    with pytest.raises(ratelimit.RateLimitedError):  # and still limits
        await limiter.acquire(1, deadline=time.monotonic() + 0.2)
    await conn.close()


async def test_judges_built_with_a_quota_use_the_shared_buckets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    with shared_redis() as (url, prefix):
        conn = RedisConnection(url, prefix)
        backend = RedisBuckets(conn)
        ratelimit.set_shared_backend(backend)
        try:
            settings = Settings(llm_rate_limits={"anthropic": {"rpm": 120, "tpm": 100_000}})
            limited = build_llm_judge("anthropic", "m1", settings)
            unlimited = build_llm_judge("anthropic", "m2", Settings())
            assert limited.provider.limiter.shared is backend
            assert unlimited.provider.limiter.shared is None
            await limited.provider.limiter.acquire(1000)
            await asyncio.sleep(0)
            level = await conn.client.hget(
                f"{prefix}:bucket:{limited.provider.limiter.name}:tpm", "level"
            )
            assert level is not None and float(level) < 100_000 / 60 * 10
            await limited.aclose()
            await unlimited.aclose()
        finally:
            ratelimit.set_shared_backend(None)
            await conn.close()
