"""Token buckets: one arithmetic, kept in this process or in a shared Redis.

A bucket holds up to `capacity` tokens and refills at `rate` per second. A take
of `amount` waits until ``min(amount, capacity)`` tokens are there, then takes
all of `amount` (the level may go negative): a request bigger than the bucket
waits for a full one instead of never passing. A take names a limiter and one
or more buckets of it (a *demand* each) and takes from all of them or from
none; a limiter may also be paused (no take before some time, whatever the
buckets hold). Two backends answer alike behind `Buckets`:

- `LocalBuckets`, this process's: the in-process store, the API's fallback while
  Redis is down, and every provider limiter without Redis;
- `RedisBuckets`, one quota shared by every process on the same Redis: each
  call is one Lua script, so a check-and-take is atomic across processes, and
  the script reads Redis's own clock, so machines with skewed clocks still
  share one quota.

Used twice: the per-API-key request limit (`judge_service.api.auth`, through the
store) and the per-provider limiter of the LLM judge
(`judge_service.judges.llm.ratelimit`). Redis is only a type annotation here,
so importing this module never imports a Redis client.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from judge_service.store.redis_conn import RedisConnection

# A bucket holds this many seconds' worth of its rate: short bursts pass, a whole
# minute's quota never leaves at once (providers enforce limits continuously).
BURST_SECONDS = 10.0

# (bucket suffix, rate per second, capacity, amount)
Demand = tuple[str, float, float, float]


def burst_capacity(rate_per_s: float) -> float:
    """The default capacity of a bucket refilled at `rate_per_s`: BURST_SECONDS of it."""
    return max(1.0, rate_per_s * BURST_SECONDS)


@dataclass(frozen=True)
class Quota:
    """A bucket's shape: its rate (per second) and its capacity."""

    rate: float
    capacity: float

    @classmethod
    def per_minute(cls, per_minute: float) -> Quota:
        rate = per_minute / 60.0
        return cls(rate, burst_capacity(rate))

    def demand(self, suffix: str, amount: float) -> Demand:
        return (suffix, self.rate, self.capacity, amount)


class Bucket:
    """One bucket's state; times are in the units of whatever clock the caller reads."""

    __slots__ = ("capacity", "level", "rate", "stamp")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.level = capacity
        self.stamp = now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def wait_for(self, amount: float) -> float:
        """Seconds until `amount` can be taken (a request bigger than the bucket needs it full)."""
        need = min(amount, self.capacity)
        return 0.0 if self.level >= need else (need - self.level) / self.rate


class Buckets(Protocol):
    """Where a limiter's buckets and pause live: `LocalBuckets` or `RedisBuckets`."""

    async def take(self, name: str, demands: Sequence[Demand]) -> float:
        """Take each demand's amount from bucket ``name:suffix``, from all or from none:
        0 when taken, else the seconds to wait (a pause of `name` included)."""
        ...

    async def adjust(
        self, name: str, suffix: str, rate: float, capacity: float, delta: float
    ) -> None:
        """Take `delta` more from one bucket (negative gives back), whatever it holds."""
        ...

    async def pause(self, name: str, seconds: float) -> None:
        """No take of `name` for `seconds` from now (never moves a later pause earlier)."""
        ...


class LocalBuckets:
    """`Buckets` in this process. The ``*_now`` methods are the same calls, synchronous:
    each runs between awaits, so it is atomic on one event loop without a lock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, Bucket] = {}
        self._resume: dict[str, float] = {}

    def _bucket(self, key: str, rate: float, capacity: float, now: float) -> Bucket:
        bucket = self._buckets.get(key)
        # A changed quota (a config reload) starts from a full bucket of the new shape.
        if bucket is None or bucket.rate != rate or bucket.capacity != capacity:
            bucket = self._buckets[key] = Bucket(rate, capacity, now)
        return bucket

    def resume_at(self, name: str) -> float:
        """No take of `name` before this time (clock units); 0 when never paused."""
        return self._resume.get(name, 0.0)

    def take_now(self, name: str, demands: Sequence[Demand]) -> float:
        now = self._clock()
        wait = max(0.0, self.resume_at(name) - now)
        held: list[tuple[Bucket, float]] = []
        for suffix, rate, capacity, amount in demands:
            bucket = self._bucket(f"{name}:{suffix}", rate, capacity, now)
            bucket.refill(now)
            wait = max(wait, bucket.wait_for(amount))
            held.append((bucket, amount))
        if wait > 0:
            return wait
        for bucket, amount in held:
            bucket.level -= amount
        return 0.0

    def adjust_now(
        self, name: str, suffix: str, rate: float, capacity: float, delta: float
    ) -> None:
        # Unlike RedisBuckets, no refill first: this process's limiter always settled so,
        # and the two differ only when the bucket would have filled up meanwhile.
        bucket = self._bucket(f"{name}:{suffix}", rate, capacity, self._clock())
        bucket.level -= delta

    def pause_now(self, name: str, seconds: float) -> None:
        self._resume[name] = max(self.resume_at(name), self._clock() + seconds)

    async def take(self, name: str, demands: Sequence[Demand]) -> float:
        return self.take_now(name, demands)

    async def adjust(
        self, name: str, suffix: str, rate: float, capacity: float, delta: float
    ) -> None:
        self.adjust_now(name, suffix, rate, capacity, delta)

    async def pause(self, name: str, seconds: float) -> None:
        self.pause_now(name, seconds)


# The scripts below are `Bucket` and `LocalBuckets.take_now` again, in Lua. Keys (see
# `judge_service.store.redis_conn`): P:bucket:{name}:{suffix}, a hash {level, stamp} that
# expires once it would be full again (plus a minute); P:pause:{name}, the resume time.

# KEYS[1]: the pause key; KEYS[2..]: bucket hashes. ARGV: rate, capacity, amount per bucket.
# Takes from every bucket or from none; returns the seconds to wait as a string (Lua numbers
# returned to Redis are truncated to integers).
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local wait = 0
local resume = tonumber(redis.call('GET', KEYS[1]) or '0')
if resume > now then wait = resume - now end
local levels = {}
for i = 2, #KEYS do
  local j = (i - 2) * 3
  local rate, cap, amount = tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3])
  local s = redis.call('HMGET', KEYS[i], 'level', 'stamp')
  local level = tonumber(s[1]) or cap
  local stamp = tonumber(s[2]) or now
  if now > stamp then level = math.min(cap, level + (now - stamp) * rate) end
  levels[i] = level
  local need = math.min(amount, cap)
  if level < need then wait = math.max(wait, (need - level) / rate) end
end
if wait > 0 then return tostring(wait) end
for i = 2, #KEYS do
  local j = (i - 2) * 3
  local rate, cap, amount = tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3])
  redis.call('HSET', KEYS[i], 'level', tostring(levels[i] - amount), 'stamp', tostring(now))
  redis.call('EXPIRE', KEYS[i], math.ceil(cap / rate) + 60)
end
return '0'
"""

# KEYS[1]: a bucket. ARGV: rate, capacity, delta (taken away; negative gives back).
_ADJUST = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rate, cap, delta = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local s = redis.call('HMGET', KEYS[1], 'level', 'stamp')
local level = tonumber(s[1]) or cap
local stamp = tonumber(s[2]) or now
if now > stamp then level = math.min(cap, level + (now - stamp) * rate) end
redis.call('HSET', KEYS[1], 'level', tostring(level - delta), 'stamp', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(cap / rate) + 60)
return 1
"""

# KEYS[1]: the pause key. ARGV: seconds. Only ever moves the resume time later.
_PAUSE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local until_ = now + tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if until_ > current then
  redis.call('SET', KEYS[1], tostring(until_), 'PX', math.ceil(tonumber(ARGV[1]) * 1000) + 1000)
end
return 1
"""


class RedisBuckets:
    """`Buckets` in Redis; a connection failure raises `StoreUnavailable` (callers fall back
    to their `LocalBuckets`)."""

    def __init__(self, conn: RedisConnection) -> None:
        self.conn = conn
        self._take = conn.client.register_script(_TAKE)
        self._adjust = conn.client.register_script(_ADJUST)
        self._pause = conn.client.register_script(_PAUSE)

    async def take(self, name: str, demands: Sequence[Demand]) -> float:
        keys = [self.conn.keys.pause(name)]
        args: list[float] = []
        for suffix, rate, capacity, amount in demands:
            keys.append(self.conn.keys.bucket(f"{name}:{suffix}"))
            args += [rate, capacity, amount]
        raw = await self.conn.run(lambda _: self._take(keys=keys, args=args))
        return max(0.0, float(raw))

    async def adjust(
        self, name: str, suffix: str, rate: float, capacity: float, delta: float
    ) -> None:
        key = self.conn.keys.bucket(f"{name}:{suffix}")
        await self.conn.run(lambda _: self._adjust(keys=[key], args=[rate, capacity, delta]))

    async def pause(self, name: str, seconds: float) -> None:
        key = self.conn.keys.pause(name)
        await self.conn.run(lambda _: self._pause(keys=[key], args=[seconds]))
