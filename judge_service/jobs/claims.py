"""Claiming by judging slots, not by entries, on Redis Streams.

A groupwise job's entry stands for its whole group (`jobs.groups`), and each member's
session holds one of the worker's judging slots for as long as the group is judged. So a
worker asks for entries by the slots it has free: an entry carries its group's size as
field ``n`` (ENQUEUE and RELEASE write it; an entry without one is one rollout), and one
script takes, in queue order, the entries whose slots fit (`Entry.slots`, at most the
worker's all). The next entry that does not fit stays queued for a worker with room: the
groups spread over the workers, and every claimed group is judged at once.

XREADGROUP cannot be told to stop at a sum of slots, so the script looks at the entries
after the group's last delivered one (XRANGE, at most `slots` of them, as each holds one
slot or more) and then reads that many; both in one script, so no other worker reads in
between. It cannot block either: when nothing is queued, the claim waits with a plain
XREAD from the last delivered id (it takes nothing) and then claims again.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from redis import exceptions as redis_errors

from judge_service.jobs.failover import missing_group, script_entry
from judge_service.jobs.model import Claimed
from judge_service.jobs.scripts import SLOTS
from judge_service.store.redis_conn import GROUP, Keys, RedisConnection

# KEYS: stream. ARGV: group, consumer, slots, cap (0: none). Claims, in queue order, the
# new entries whose slots fit. Returns {last delivered id before the claim, entries
# looked at, the XREADGROUP reply (empty when none fit)}.
CLAIM = (
    SLOTS
    + """
local last = '0-0'
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local f = {}
  for k = 1, #g, 2 do f[g[k]] = g[k + 1] end
  if f['name'] == ARGV[1] then last = f['last-delivered-id'] end
end
local free, cap = tonumber(ARGV[3]), tonumber(ARGV[4])
local rows = redis.call('XRANGE', KEYS[1], '(' .. last, '+', 'COUNT', free)
local take, used = 0, 0
for _, row in ipairs(rows) do
  used = used + slots(row[2], cap)
  if used > free then break end
  take = take + 1
end
if take == 0 then return {last, #rows, {}} end
local read = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', take, 'STREAMS',
  KEYS[1], '>')
return {last, #rows, read[1][2]}
"""
)


class RedisClaims(ABC):
    """Mixed into `jobs.queue.RedisJobStore`, which sets `conn`, `keys` and `_claim` (the
    registered CLAIM)."""

    conn: RedisConnection
    keys: Keys
    _claim: Any

    @abstractmethod
    async def ensure_queue(self) -> None:
        """Create the stream and its group if missing."""

    async def claim(
        self, consumer: str, count: int, block_s: float, cap: int | None = None
    ) -> Claimed:
        args: list[str | int] = [GROUP, consumer, count, cap or 0]
        claimed, seen, last = await self._claim_once(args)
        if claimed or seen or block_s <= 0 or last is None:
            return claimed
        stream, block = self.keys.stream, max(1, int(block_s * 1000))
        await self.conn.run(lambda r: r.xread({stream: last}, count=1, block=block))
        claimed, _, _ = await self._claim_once(args)
        return claimed

    async def _claim_once(self, args: list[str | int]) -> tuple[Claimed, int, str | None]:
        """The entries claimed, how many new ones were looked at, the last delivered id
        (None: the group was missing, and is made again)."""
        keys = [self.keys.stream]
        try:
            last, seen, messages = await self.conn.run(lambda _: self._claim(keys=keys, args=args))
        except redis_errors.ResponseError as exc:
            if not missing_group(exc):
                raise
            await self.ensure_queue()  # Redis lost it (restarted without persistence)
            return Claimed(), 0, None
        claimed = Claimed(e for e in map(script_entry, messages) if e is not None)
        claimed.full = not claimed and seen > 0
        return claimed, int(seen), str(last)
