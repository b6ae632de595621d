"""Token buckets in Redis: one quota shared by every process that uses the same Redis.

Used twice: the per-API-key request limit, and the per-provider limiter of the
LLM judge (`judge_service.judges.llm.ratelimit` holds the interface, so that
module never imports Redis). Each take is one Lua script, so a check-and-take is
atomic across processes; the script reads Redis's own clock, so machines with
skewed clocks still share one quota.
"""

from __future__ import annotations

from collections.abc import Sequence

from judge_service.store.redis_conn import RedisConnection

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

# (bucket suffix, rate per second, capacity, amount)
Demand = tuple[str, float, float, float]


class RedisBuckets:
    """Implements `judge_service.judges.llm.ratelimit.SharedBuckets` over Redis."""

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
