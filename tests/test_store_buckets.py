"""Token buckets: the arithmetic, the same answers from this process's buckets and from
Redis's, the key layout a running deployment relies on; and the provider limiter on them:
two processes together get one quota, without Redis each falls back to its own buckets."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable

import pytest

from judge_service.buckets import (
    Bucket,
    Buckets,
    Demand,
    LocalBuckets,
    Quota,
    RedisBuckets,
    burst_capacity,
)
from judge_service.config import Settings
from judge_service.errors import RateLimitedError
from judge_service.judges.llm import ratelimit
from judge_service.judges.llm.llm_judge import build_llm_judge
from judge_service.store.redis_conn import RedisConnection
from judge_service.store.redis_store import RedisStore
from tests.redis_support import ROOT, free_port, shared_redis


def test_a_bucket_refills_at_its_rate_up_to_its_capacity() -> None:
    bucket = Bucket(rate=2.0, capacity=3.0, now=10.0)
    assert bucket.level == 3.0  # starts full
    bucket.level = 0.0
    bucket.refill(10.25)
    assert bucket.level == 0.5 and bucket.stamp == 10.25
    assert bucket.wait_for(1.0) == 0.25  # half a token short at 2/s
    assert bucket.wait_for(10.0) == 1.25  # more than it holds: waits until it is full
    assert bucket.wait_for(0.5) == 0.0
    bucket.refill(60.0)
    assert bucket.level == 3.0  # never above its capacity
    assert burst_capacity(0.05) == 1.0 and burst_capacity(2.0) == 20.0
    assert Quota.per_minute(600) == Quota(rate=10.0, capacity=100.0)


def test_local_buckets_take_from_all_or_none_and_start_over_on_a_new_quota() -> None:
    now = [0.0]
    local = LocalBuckets(lambda: now[0])
    small, big = ("a", 1.0, 2.0, 1.0), ("b", 1.0, 10.0, 5.0)
    assert local.take_now("x", [small]) == 0.0
    assert local.take_now("x", [small]) == 0.0
    assert local.take_now("x", [small, big]) == 1.0  # "a" is empty: "b" keeps its 10
    now[0] = 1.0
    assert local.take_now("x", [small, big]) == 0.0
    assert local.take_now("x", [big]) == 0.0
    assert local.take_now("x", [big]) == 5.0
    assert local.take_now("y", [big]) == 0.0  # another limiter, other buckets
    assert local.take_now("x", [("b", 1.0, 20.0, 5.0)]) == 0.0  # reconfigured: full again
    local.adjust_now("x", "a", 1.0, 2.0, -3.0)  # given back, capped at the next take
    now[0] = 2.0
    assert local.take_now("x", [("a", 1.0, 2.0, 2.0)]) == 0.0
    assert local.take_now("x", [small]) == 1.0


# One script of takes, pauses and clock steps for both backends, with the answers the
# arithmetic gives: limiter "p", buckets "rpm" (0.5/s, 3) and "tpm" (10/s, 100).
RPM: Demand = ("rpm", 0.5, 3.0, 1.0)


def tpm(amount: float) -> Demand:
    return ("tpm", 10.0, 100.0, amount)


SCRIPT: list[tuple[str, float | list[Demand]]] = [
    *[("take", [RPM])] * 4,  # 0, 0, 0, then 1 token at 0.5/s: 2.0
    ("step", 1.0),
    ("take", [RPM]),  # half a token there: 1.0
    ("step", 1.5),
    ("take", [RPM]),  # 1.25 there: 0
    ("take", [RPM, tpm(150)]),  # tpm is full, rpm holds 0.25: 1.5, and neither is taken
    ("step", 2.0),
    ("take", [RPM, tpm(150)]),  # rpm 1.25, tpm full: both taken, tpm down to -50
    ("take", [tpm(20)]),  # 70 short at 10/s: 7.0
    ("pause", 3.0),
    ("take", [RPM]),  # rpm could (1.5 s) but the pause says 3.0
    ("step", 2.0),
    ("take", [RPM]),  # 1.0 of the pause left
    ("step", 1.0),
    ("take", [RPM]),  # the pause is over, rpm holds 1.75: 0
    ("step", 60.0),
    *[("take", [RPM])] * 4,  # full again but no fuller: 0, 0, 0, 2.0
    ("take", [tpm(100)]),
    ("take", [tpm(1)]),  # 0.1
]
EXPECTED = [0, 0, 0, 2.0, 1.0, 0, 1.5, 0, 7.0, 3.0, 1.0, 0, 0, 0, 0, 2.0, 0, 0.1]


async def run_script(buckets: Buckets, step: Callable[[float], Awaitable[None]]) -> list[float]:
    answers = []
    for op, arg in SCRIPT:
        if op == "take":
            assert isinstance(arg, list)
            answers.append(await buckets.take("p", arg))
        elif op == "pause":
            assert isinstance(arg, float)
            await buckets.pause("p", arg)
        else:
            assert isinstance(arg, float)
            await step(arg)
    return answers


@pytest.mark.redis
async def test_both_backends_give_the_same_answers() -> None:
    now = [1000.0]

    async def local_step(seconds: float) -> None:
        now[0] += seconds

    local = await run_script(LocalBuckets(lambda: now[0]), local_step)
    assert local == pytest.approx(EXPECTED)

    with shared_redis() as (url, prefix):
        conn = RedisConnection(url, prefix)
        client = conn.client

        # Redis's clock cannot be moved: age every bucket and pause of the limiter instead.
        async def redis_step(seconds: float) -> None:
            async for key in client.scan_iter(match=f"{prefix}:bucket:p:*"):
                await client.hincrbyfloat(key, "stamp", -seconds)
            resume = await client.get(f"{prefix}:pause:p")
            if resume is not None:
                await client.set(f"{prefix}:pause:p", repr(float(resume) - seconds), keepttl=True)

        try:
            shared = await run_script(RedisBuckets(conn), redis_step)
        finally:
            await conn.close()
    # Real time passes between the calls to Redis (a little more refill, a little less pause).
    assert shared == pytest.approx(EXPECTED, abs=0.2)
    assert [a == 0 for a in shared] == [e == 0 for e in EXPECTED]


@pytest.mark.redis
async def test_redis_keys_and_ttls_stay_as_deployed() -> None:
    """Running deployments hold these keys: renaming them would reset every quota."""
    with shared_redis() as (url, prefix):
        store = RedisStore(url, prefix=prefix, cache_ttl_s=60)
        client = store.conn.client
        try:
            assert await store.take_tokens("api:k1", rate_per_s=0.1, capacity=8.0) == 0.0
            key = f"{prefix}:bucket:api:k1:requests"
            assert float(await client.hget(key, "level")) == 7.0
            assert 125 <= await client.ttl(key) <= 140  # ceil(capacity / rate) + 60
            await store.buckets.take("q:e", [("rpm", 1.0, 10.0, 1.0), ("tpm", 50.0, 500.0, 9.0)])
            await store.buckets.adjust("q:e", "tpm", 50.0, 500.0, 100.0)
            await store.buckets.pause("q:e", 5.0)
            assert float(await client.hget(f"{prefix}:bucket:q:e:rpm", "level")) == 9.0
            tpm_level = float(await client.hget(f"{prefix}:bucket:q:e:tpm", "level"))
            assert 391.0 <= tpm_level <= 392.0  # 500 - 9 - 100, plus refill meanwhile
            assert 65 <= await client.ttl(f"{prefix}:bucket:q:e:tpm") <= 70
            assert 0 < await client.pttl(f"{prefix}:pause:q:e") <= 6000
            assert await store.take_tokens("api:k1", rate_per_s=0.1, capacity=8.0) == 0.0
        finally:
            await store.close()


# One process: a limiter at 600 rpm (10/s, a bucket of 100) taking 60 requests. It says
# "ready" once imported and connected, then starts at the wall-clock time read from stdin:
# a start fixed in advance was missed by a process that imported slowly on a loaded machine.
CLIENT = """
import asyncio, sys, time
from judge_service.judges.llm.ratelimit import RateLimiter
from judge_service.buckets import RedisBuckets
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


@pytest.mark.redis
@pytest.mark.slow
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
    with pytest.raises(RateLimitedError):  # and still limits
        await limiter.acquire(1, deadline=time.monotonic() + 0.2)
    await conn.close()


@pytest.mark.redis
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
