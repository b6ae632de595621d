"""The store, in-process and on Redis: first-write-wins judgments per tenant, token buckets,
and the engine's cache around judging (hit, miss, bypass, unavailable)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from judge_service import credit as credit_mod
from judge_service.config import Settings
from judge_service.errors import StoreUnavailable
from judge_service.pipeline import Engine
from judge_service.schemas import Options, Rollout
from judge_service.store import Store, open_store
from judge_service.store.memory import MemoryStore
from judge_service.store.redis_store import RedisStore
from judge_service.trace.tokenizer import LoadedTokenizer
from tests.redis_support import drop_prefix, free_port, require_redis, unique_prefix

TEXT = "<think>\n17 × 24 = 418.\nSo the answer is 418.\n</think>\n\\boxed{418}"


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
        return
    url, prefix = require_redis(), unique_prefix()
    redis_store = RedisStore(url, prefix=prefix, cache_ttl_s=600)
    try:
        yield redis_store
    finally:
        await redis_store.close()
        drop_prefix(url, prefix)


async def test_first_write_wins_and_tenants_are_separate(store: Store) -> None:
    assert await store.get_judgment("a", "sha256:k") is None
    assert await store.put_judgment("a", "sha256:k", '{"v": 1}') is True
    assert await store.put_judgment("a", "sha256:k", '{"v": 2}') is False
    assert await store.get_judgment("a", "sha256:k") == '{"v": 1}'
    assert await store.get_judgment("b", "sha256:k") is None  # another key sees nothing
    # replace=True: the one way over a stored judgment (a transcript asked for later).
    assert await store.put_judgment("a", "sha256:k", '{"v": 3}', replace=True) is True
    assert await store.get_judgment("a", "sha256:k") == '{"v": 3}'
    await store.ping()


async def test_token_bucket_allows_the_burst_then_says_how_long_to_wait(store: Store) -> None:
    waits = [await store.take_tokens("api:t", rate_per_s=2.0, capacity=3) for _ in range(4)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert 0.3 < waits[3] <= 0.5  # one token at 2/s
    time.sleep(0.55)
    assert await store.take_tokens("api:t", rate_per_s=2.0, capacity=3) == 0.0
    assert await store.take_tokens("api:other", rate_per_s=2.0, capacity=3) == 0.0


def test_memory_store_evicts_least_recently_used_beyond_its_budget() -> None:
    import asyncio

    async def go() -> None:
        small = MemoryStore(max_bytes=100)
        for i in range(5):
            await small.put_judgment("t", f"k{i}", "x" * 30)
            await small.get_judgment("t", "k0")  # k0 stays recently used
        assert await small.get_judgment("t", "k0") is not None
        assert await small.get_judgment("t", "k1") is None
        assert await small.get_judgment("t", "k4") is not None

    asyncio.run(go())


async def test_an_unreachable_redis_is_unavailable_fast_and_recovers_nothing_silently() -> None:
    down = RedisStore(f"redis://127.0.0.1:{free_port()}/0", prefix="x", cache_ttl_s=60)
    began = time.perf_counter()
    with pytest.raises(StoreUnavailable, match="redis unavailable"):
        await down.get_judgment("t", "k")
    with pytest.raises(StoreUnavailable):  # the breaker: no second connection attempt
        await down.put_judgment("t", "k", "{}")
    with pytest.raises(StoreUnavailable):
        await down.ping()  # probes skip the breaker but still fail
    assert time.perf_counter() - began < 2.0
    await down.close()


def test_open_store_follows_the_settings() -> None:
    assert isinstance(open_store(Settings()), MemoryStore)
    assert isinstance(open_store(Settings(redis_url="redis://127.0.0.1:1/0")), RedisStore)


def test_reclaim_time_must_exceed_the_longest_deadline() -> None:
    with pytest.raises(ValueError, match="must exceed jobs_max_deadline_s"):
        Settings(jobs_max_deadline_s=60, jobs_reclaim_idle_s=60)


def _rollout(bpe: LoadedTokenizer, bpe_dir: Path, **extra: Any) -> Rollout:
    ids = bpe.hf.encode(TEXT, add_special_tokens=False)
    values: dict[str, Any] = {
        "id": "r1",
        "problem": "What is 17 × 24?",
        "response_token_ids": ids,
        "tokenizer": str(bpe_dir),
        "reference_answer": "408",
        "reward": 0.0,
        **extra,
    }
    return Rollout(**values)


async def test_engine_reuses_a_cached_judgment_for_the_same_content(
    store: Store, bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    engine = Engine(Settings(), store=store)
    first = await engine.judge_one(_rollout(bpe, bpe_dir), Options())
    assert first.cache == "miss" and first.status == "ok" and first.spans
    # Same content under another id, another encoding, with an advantage: a hit, rebuilt.
    again = await engine.judge_one(
        _rollout(bpe, bpe_dir, id="r2"),
        Options(credit_encoding="spans"),
        advantage=credit_mod.GroupAdvantage(-0.5, 0.5),
    )
    assert again.cache == "hit" and again.id == "r2"
    assert again.cache_key == first.cache_key and again.spans == first.spans
    dense = np.asarray(first.credit)
    wire = again.model_dump(mode="json")
    assert np.array_equal(credit_mod.decode(wire["credit"], again.num_tokens, "spans"), dense)
    advantage = credit_mod.decode(wire["advantage"], again.num_tokens, "spans")
    assert np.allclose(advantage, dense - 0.5)
    assert again.judge is not None and again.judge.output_tokens == 0
    # Stored per tenant: another tenant judges afresh.
    other = await engine.for_tenant("someone-else").judge_one(_rollout(bpe, bpe_dir), Options())
    assert other.cache == "miss"
    # use_cache false neither reads nor writes.
    bypass = await engine.judge_one(_rollout(bpe, bpe_dir), Options(use_cache=False))
    assert bypass.cache == "bypass" and bypass.credit == first.credit


async def test_a_credit_sweep_reuses_one_judgment(
    store: Store, bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    """λ, κ, kappa_mode and min_confidence are applied per request: the judge runs once."""
    engine = Engine(Settings(), store=store)
    rollout = _rollout(bpe, bpe_dir, id="sweep", problem="sweep: 17 × 24?")
    first = await engine.judge_one(rollout, Options())
    base = np.asarray(first.credit)
    assert first.cache == "miss" and base.any()
    for lam in (0.1, 0.5, 1.0):
        swept = await engine.judge_one(rollout, Options(**{"lambda": lam, "kappa": 10.0}))
        assert swept.cache == "hit" and swept.cache_key == first.cache_key
        assert np.allclose(np.asarray(swept.credit), base * lam / 0.25)
    capped = await engine.judge_one(rollout, Options(**{"lambda": 4.0, "kappa": 0.05}))
    assert capped.cache == "hit" and np.abs(np.asarray(capped.credit)).mean() == pytest.approx(0.05)
    strict = await engine.judge_one(rollout, Options(min_confidence=1.0))
    assert strict.cache == "hit" and not np.asarray(strict.credit).any()
    relative = await engine.judge_one(
        rollout,
        Options(kappa_mode="relative", **{"lambda": 1.0}),
        advantage=credit_mod.GroupAdvantage(-0.1, 0.1),
    )
    assert relative.cache == "hit"
    assert np.abs(np.asarray(relative.credit)).mean() == pytest.approx(0.25 * 0.1)


async def test_a_transcript_asked_of_a_judgment_cached_without_one_judges_again(
    store: Store, bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    engine = Engine(Settings(), store=store)
    plain = _rollout(bpe, bpe_dir, id="t1", problem="no transcript kept")
    first = await engine.judge_one(plain, Options())
    assert first.cache == "miss" and first.transcript is None
    asked = await engine.judge_one(plain, Options(include_transcript=True))
    # Not a hit that silently lacks it: judged again, and the new judgment replaces the old.
    assert asked.cache == "miss" and asked.transcript is not None
    again = await engine.judge_one(plain, Options(include_transcript=True))
    assert again.cache == "hit" and again.transcript == asked.transcript
    assert again.cache_key == first.cache_key
    plain_again = await engine.judge_one(plain, Options())
    assert plain_again.cache == "hit" and plain_again.transcript is None


async def test_engine_judges_without_the_cache_when_the_store_is_down(
    bpe: LoadedTokenizer, bpe_dir: Path
) -> None:
    down = RedisStore(f"redis://127.0.0.1:{free_port()}/0", prefix="x", cache_ttl_s=60)
    engine = Engine(Settings(), store=down)
    result = await engine.judge_one(_rollout(bpe, bpe_dir), Options())
    assert result.status == "ok" and result.cache == "unavailable" and result.spans
    without = await Engine(Settings()).judge_one(_rollout(bpe, bpe_dir), Options())
    assert without.cache is None and without.credit == result.credit
    await down.close()
