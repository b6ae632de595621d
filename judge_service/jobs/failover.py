"""Which workers are alive, taking over a dead worker's rollouts, and the queue's figures.

Every consumer (``judge-service worker`` and the in-process worker of ``serve``)
writes a heartbeat into ``P:beats`` five times per ``JUDGE_JOBS_DEAD_AFTER_S`` (every
second by default), timed by Redis's own clock (``TIME`` inside the script), so
clocks that differ between machines cannot make a live worker look dead. A consumer
whose heartbeat is older than ``JUDGE_JOBS_DEAD_AFTER_S`` is dead: the next live
worker with a free slot claims that consumer's pending entries (``XPENDING ...
<consumer>`` + ``XCLAIM``, in one script, so two live workers never both take the
same entry) and removes the consumer from the group once it has none left. A live
worker's entries are never taken, however long its judge sessions run: its heartbeat
is fresh.

The idle-time reclaim (``JUDGE_JOBS_RECLAIM_IDLE_S``) remains only for entries of
consumers with no heartbeat record at all (a worker of an older version, or one
gone for longer than `FORGET_MS`).
"""

from __future__ import annotations

import time
from typing import Any

from redis import exceptions as redis_errors

from judge_service.jobs.model import Entry, QueueStats, Takeover, queued_age_s
from judge_service.jobs.scripts import SLOTS, STATUSES
from judge_service.store.redis_conn import GROUP, RedisConnection

FORGET_MS = 3_600_000  # a heartbeat record this old is dropped; so is an idle empty consumer
_SCAN = 200  # pending entries looked at per idle-reclaim call
_MAX_CLAIM = 1000  # entries per XCLAIM (Lua's unpack has a limit of a few thousand)

# KEYS: beats, workers. ARGV: consumer, forget ms, external ("1"/"0"), this host's time (s).
# `workers` lists separate workers only (by this host's clock, as before): `serve` in auto
# mode steps aside while one of them is alive. Returns Redis's time (ms).
BEAT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if ARGV[3] == '1' then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', tonumber(ARGV[4]) - tonumber(ARGV[2]) / 1000)
end
return now
"""

# Pending entries from XPENDING rows, in order, while their slots (`claims.SLOTS`) fit in
# `free`. Returns their ids and the slots they hold.
_FIT = (
    SLOTS
    + """
local function fit(stream, rows, free, cap)
  local ids, used = {}, 0
  for _, r in ipairs(rows) do
    local m = redis.call('XRANGE', stream, r[1], r[1])
    local n = 1
    if m[1] then n = slots(m[1][2], cap) end
    if used + n > free then break end
    used = used + n
    ids[#ids + 1] = r[1]
  end
  return ids, used
end
"""
)

# KEYS: stream, beats. ARGV: group, me, dead after (ms), slots, forget ms, cap (0: none).
# Pending entries of dead consumers holding up to `slots` slots, claimed by `me`; a dead
# consumer with nothing left pending is removed (its heartbeat too), as is a consumer with
# no heartbeat record, nothing pending and idle for `forget ms`. Returns {claimed
# entries, {consumer of each claimed entry}, {removed consumers}}.
TAKE_OVER = (
    _FIT
    + """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local want, cap, used = tonumber(ARGV[4]), tonumber(ARGV[6]), 0
local claimed, owners, removed = {}, {}, {}
local info = redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
for _, row in ipairs(info) do
  local c = {}
  for k = 1, #row, 2 do c[row[k]] = row[k + 1] end
  local name = c['name']
  if name ~= ARGV[2] then
    local beat = redis.call('ZSCORE', KEYS[2], name)
    local dead = beat and now - tonumber(beat) > tonumber(ARGV[3])
    local pending = tonumber(c['pending'])
    if dead and pending > 0 and used < want then
      local rows = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', want - used, name)
      local ids, took = fit(KEYS[1], rows, want - used, cap)
      used = used + took
      if #ids > 0 then
        for _, m in ipairs(redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, unpack(ids))) do
          claimed[#claimed + 1] = m
          owners[#owners + 1] = name
        end
      end
      pending = #redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, name)
    end
    local forgotten = (not beat) and tonumber(c['idle']) > tonumber(ARGV[5])
    if pending == 0 and (dead or forgotten) then
      redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], name)
      redis.call('ZREM', KEYS[2], name)
      removed[#removed + 1] = name
    end
  end
end
return {claimed, owners, removed}
"""
)

# KEYS: stream, beats. ARGV: group, me, min idle (ms), start, slots, scan, cap (0: none).
# The last resort: entries idle for `min idle` whose consumer has no heartbeat record,
# claimed by `me` while their slots fit in `slots`. Looks at up to `scan` pending entries
# from `start`; returns {next start ("0-0" once the end was reached), claimed entries}.
IDLE_CLAIM = (
    SLOTS
    + """
local rows = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', ARGV[3], ARGV[4], '+', ARGV[6])
local want, cap, used = tonumber(ARGV[5]), tonumber(ARGV[7]), 0
local ids, last, full = {}, nil, false
for _, r in ipairs(rows) do
  if r[2] ~= ARGV[2] and not redis.call('ZSCORE', KEYS[2], r[2]) then
    local m = redis.call('XRANGE', KEYS[1], r[1], r[1])
    local n = 1
    if m[1] then n = slots(m[1][2], cap) end
    if used + n > want then full = true break end
    used = used + n
    ids[#ids + 1] = r[1]
  end
  last = r[1]
  if used >= want then full = true break end
end
local cursor = '0-0'
if last and (#rows >= tonumber(ARGV[6]) or full) then cursor = '(' .. last end
if full and not last then cursor = ARGV[4] end
if #ids == 0 then return {cursor, {}} end
return {cursor, redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], unpack(ids))}
"""
)

# KEYS: stream. ARGV: group, me, start, count.
# Entries pending under `me` from `start` on: left by an earlier process with the same
# consumer name (a worker restarted with the same --name, or a container restarted with
# the same host name and pid). Claimed again (delivery counted), so they are returned with
# their fields. Returns {next start ("0-0" at the end), entries}.
ADOPT = """
local rows = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], '+', ARGV[4], ARGV[2])
if #rows == 0 then return {'0-0', {}} end
local ids = {}
for _, r in ipairs(rows) do ids[#ids + 1] = r[1] end
local cursor = '0-0'
if #rows >= tonumber(ARGV[4]) then cursor = '(' .. ids[#ids] end
return {cursor, redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, unpack(ids))}
"""

# KEYS: stream, beats, workers. ARGV: group, consumer.
# A worker that stopped cleanly leaves no trace, unless it could not give back an entry:
# then its heartbeat stays, goes stale, and a live worker takes the entry over.
RETIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  local ok, rows = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
  if ok and #rows > 0 then return 0 end
  if ok then redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2]) end
end
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[2])
return 1
"""


def missing_group(exc: redis_errors.ResponseError) -> bool:
    """Redis lost the stream or group (restarted without persistence)."""
    text = str(exc)
    return "NOGROUP" in text or "no such key" in text


class RedisFailover:
    """The heartbeat and takeover side of `RedisJobStore` (same connection and keys)."""

    def __init__(self, conn: RedisConnection, ttl_s: int) -> None:
        self.conn = conn
        self.keys = conn.keys
        self.ttl_s = ttl_s
        self.beats = f"{conn.keys.prefix}:beats"
        self.status_keys = [f"{conn.keys.prefix}:jobs:{s}" for s in STATUSES]
        client = conn.client
        self._beat = client.register_script(BEAT)
        self._take_over = client.register_script(TAKE_OVER)
        self._idle_claim = client.register_script(IDLE_CLAIM)
        self._retire = client.register_script(RETIRE)
        self._adopt = client.register_script(ADOPT)
        self._cursor = "0-0"

    async def heartbeat(self, consumer: str, external: bool) -> None:
        keys = [self.beats, self.keys.workers]
        args: list[str | int | float] = [consumer, FORGET_MS, "1" if external else "0", time.time()]
        await self.conn.run(lambda _: self._beat(keys=keys, args=args))

    async def take_over(
        self, consumer: str, dead_after_s: float, count: int, cap: int | None = None
    ) -> Takeover:
        keys = [self.keys.stream, self.beats]
        want = min(count, _MAX_CLAIM)
        args: list[str | int] = [GROUP, consumer, int(dead_after_s * 1000), want, FORGET_MS]
        args.append(cap or 0)
        try:
            reply = await self.conn.run(lambda _: self._take_over(keys=keys, args=args))
        except redis_errors.ResponseError as exc:
            if missing_group(exc):
                return Takeover()
            raise
        claimed, owners, removed = reply
        entries, kept = [], []
        for message, owner in zip(claimed, owners, strict=True):
            entry = script_entry(message)
            if entry is not None:
                entries.append(entry)
                kept.append(owner)
        return Takeover(entries, kept, list(removed))

    async def reclaim(
        self, consumer: str, min_idle_s: float, count: int, cap: int | None = None
    ) -> list[Entry]:
        claimed: list[Entry] = []
        keys = [self.keys.stream, self.beats]
        for _ in range(10):  # bounded work per call; the cursor carries on next time
            held = sum(e.slots(cap) for e in claimed)
            want = min(count - held, _MAX_CLAIM)
            if want <= 0:
                break
            start = self._cursor
            args = [GROUP, consumer, int(min_idle_s * 1000), start, want, _SCAN, cap or 0]
            try:
                reply = await self.conn.run(
                    lambda _, a=args: self._idle_claim(keys=keys, args=a)  # type: ignore[misc]
                )
            except redis_errors.ResponseError as exc:
                if missing_group(exc):
                    return claimed
                raise
            self._cursor = reply[0]
            claimed += [e for e in map(script_entry, reply[1]) if e is not None]
            if self._cursor in ("0-0", start):  # the end, or an entry too large for now
                break
        return claimed

    async def adopt(self, consumer: str) -> list[Entry]:
        entries: list[Entry] = []
        cursor = "-"
        while cursor != "0-0":
            args = [GROUP, consumer, cursor, _MAX_CLAIM]
            try:
                reply = await self.conn.run(
                    lambda _, a=args: self._adopt(keys=[self.keys.stream], args=a)  # type: ignore[misc]
                )
            except redis_errors.ResponseError as exc:
                if missing_group(exc):
                    return entries
                raise
            cursor = reply[0]
            entries += [e for e in map(script_entry, reply[1]) if e is not None]
        return entries

    async def retire(self, consumer: str) -> None:
        keys = [self.keys.stream, self.beats, self.keys.workers]
        await self.conn.run(lambda _: self._retire(keys=keys, args=[GROUP, consumer]))

    async def snapshot(self) -> QueueStats:
        now = time.time()

        async def read(r: Any) -> list[Any]:
            async with r.pipeline(transaction=False) as pipe:
                pipe.xinfo_groups(self.keys.stream)
                pipe.xpending(self.keys.stream, GROUP)
                pipe.zrange(self.beats, 0, -1, withscores=True)
                pipe.time()
                pipe.llen(self.keys.dead)
                pipe.xlen(self.keys.stream)
                for key in self.status_keys:  # entries outlive their job's TTL by no more
                    pipe.zremrangebyscore(key, "-inf", now - self.ttl_s)
                    pipe.zcard(key)
                replies: list[Any] = await pipe.execute(raise_on_error=False)
                return replies

        replies = await self.conn.run(read)
        groups, summary, beats, (seconds, micros), dead, length = replies[:6]
        counts = replies[7::2]
        pending: dict[str, int] = {}
        if isinstance(summary, dict):
            pending = {c["name"]: int(c["pending"]) for c in summary.get("consumers") or []}
        # Entries are deleted once acknowledged, so the stream holds the queued and the
        # pending ones; the group's `lag` says the same where Redis can tell.
        queued = max(0, int(length) - sum(pending.values())) if isinstance(length, int) else 0
        for group in groups if isinstance(groups, list) else []:
            if group.get("name") == GROUP and group.get("lag") is not None:
                queued = int(group["lag"])
        clock = seconds * 1000 + micros // 1000
        oldest_pending = 0.0
        if isinstance(summary, dict) and summary.get("min"):
            oldest_pending = queued_age_s(str(summary["min"]), clock)
        return QueueStats(
            queued=queued,
            pending=pending,
            jobs={s: int(n) for s, n in zip(STATUSES, counts, strict=True)},
            dead_letters=int(dead),
            heartbeat_age_s={name: max(0.0, (clock - ms) / 1000) for name, ms in beats},
            oldest_pending_age_s=oldest_pending,
            oldest_queued_age_s=await self._oldest_queued(groups, queued, clock),
        )

    async def _oldest_queued(self, groups: Any, queued: int, clock: int) -> float:
        """Age of the first entry after the group's last delivered one (0 when none waits)."""
        if not queued or not isinstance(groups, list):
            return 0.0
        last = next((g.get("last-delivered-id") for g in groups if g.get("name") == GROUP), None)
        if last is None:
            return 0.0
        first = await self.conn.run(
            lambda r: r.xrange(self.keys.stream, min=f"({last}", max="+", count=1)
        )
        return queued_age_s(first[0][0], clock) if first else 0.0


def script_entry(message: Any) -> Entry | None:
    """An entry from a stream message as a script returns it: [id, [field, value, ...]]."""
    if not message or not message[1]:  # a deleted entry comes back without fields
        return None
    entry_id, flat = message
    fields = dict(zip(flat[::2], flat[1::2], strict=True))
    if "job" not in fields:
        return None
    return Entry(entry_id, fields["job"], int(fields["i"]), int(fields.get("n", 1)))
