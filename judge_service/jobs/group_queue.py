"""The Redis job store's writes of a group (options.groupwise, `jobs.groups`): its
provisional results (`write_members`, bounded transactions) and its commit (FINISH_GROUP,
one atomic step). Mixed into `jobs.queue.RedisJobStore`, which registers the script.

A group's results are its largest write: up to JUDGE_MAX_TOKENS_PER_GROUP tokens of
dense credit and advantage, about 40 bytes a token. A Lua script copies each argument
twice (into Lua, then into Redis), about 1 ms a megabyte, and holds Redis all the while.
So the results are written by plain HSET, which copies once (about 0.5 ms a megabyte),
a result longer than `jobs.parts.PART_BYTES` in parts, in transactions of at most
`jobs.parts.CALL_BYTES`, each guarded by WATCH on the group's `hold` key (which BEGIN sets
to its holder, and RELEASE and the commit delete): a worker that lost the group writes
nothing, even when the group changes hands between the check and the EXEC. Each result is
tagged with its writer in `prov`, and the commit, which copies nothing, checks the tags.
Measured: bench/bench_group_write.py."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from redis import exceptions as redis_errors

from judge_service.jobs.model import Entry, GroupWrite
from judge_service.jobs.parts import Batch, batches
from judge_service.store.redis_conn import GROUP, Keys, RedisConnection


class RedisGroupWrites(ABC):
    conn: RedisConnection
    keys: Keys
    ttl_s: int
    _finish_group: Any  # the registered script
    # Tests only: awaited between a write's WATCHed check of the holder and its EXEC, where
    # a takeover must make the EXEC fail (tests/test_jobs_handover.py).
    before_exec: Callable[[], Awaitable[None]] | None = None

    @abstractmethod
    def _job_keys(self, job_id: str) -> list[str]:
        """KEYS of FINISH, FINISH_GROUP and CANCEL_RANGE."""

    async def finish_group(
        self,
        entry: Entry,
        writes: Sequence[GroupWrite],
        record: str | None = None,
        dead_record: str | None = None,
        *,
        holder: str | None = None,
    ) -> int:
        keys = [*self._job_keys(entry.job), self.keys.job(entry.job, f"hold:{entry.index}")]
        args: list[str | int | float] = [entry.index, entry.id, GROUP, time.time(), self.ttl_s]
        args += [entry.job, record or "", dead_record or "", holder or ""]
        for index, result, kind in writes:
            args += [index, result or "", kind]
        done = int(await self.conn.run(lambda _: self._finish_group(keys=keys, args=args)))
        if done == -2:  # the delivery fails, and the group is judged again
            raise LookupError(f"{entry.job}[{entry.index}]: a provisional result is missing")
        return done

    async def write_members(
        self, entry: Entry, consumer: str, writes: Sequence[tuple[int, str]]
    ) -> int:
        for batch in batches(writes):  # each a bounded transaction (`jobs.parts`)
            written = await self._write_batch(entry, consumer, batch)
            if written <= 0:
                return written
        return 1

    async def _write_batch(self, entry: Entry, consumer: str, batch: Batch) -> int:
        job, hold = self.keys.job(entry.job), self.keys.job(entry.job, f"hold:{entry.index}")
        out, prov = self.keys.job(entry.job, "out"), self.keys.job(entry.job, "prov")
        parts, nparts = self.keys.job(entry.job, "parts"), self.keys.job(entry.job, "nparts")
        indices = list(batch.counts)
        counts = {i: n for i, n in batch.counts.items() if n}

        async def write(r: Any) -> int:
            async with r.pipeline(transaction=True) as pipe:
                await pipe.watch(hold)
                if await pipe.get(hold) != consumer:  # taken over, released or committed
                    return 0 if await pipe.exists(job) else -1
                # The results written before (an earlier holder's): their parts that
                # these do not overwrite go in the same transaction (only the holder
                # writes them, and WATCH guards the holder).
                found = await pipe.hmget(nparts, indices) if indices else []
                before = {i: int(n) for i, n in zip(indices, found, strict=True) if n}
                if self.before_exec is not None:
                    await self.before_exec()
                pipe.multi()
                if stale := batch.stale(before):
                    pipe.hdel(parts, *stale)
                if gone := [i for i in before if i not in counts]:
                    pipe.hdel(nparts, *gone)
                for key, mapping in ((parts, batch.parts), (out, batch.out), (nparts, counts)):
                    if mapping:
                        pipe.hset(key, mapping=mapping)
                        pipe.expire(key, self.ttl_s)
                if batch.tagged:  # with a result's last part: a tagged one has them all
                    pipe.hset(prov, mapping=dict.fromkeys(batch.tagged, consumer))
                    pipe.expire(prov, self.ttl_s)
                await pipe.execute()
                return 1

        try:
            written: int = await self.conn.run(write)
        except redis_errors.WatchError:  # the group changed hands meanwhile
            return 0
        return written


def lead_fields(members: Mapping[int, int]) -> dict[str, str]:
    """The `lead` hash: each member's leader (ENQUEUE skips the members), and g<leader>:
    the leader's members (BEGIN and RELEASE mark them running and not)."""
    fields = {str(m): str(g) for m, g in members.items()}
    groups: dict[int, list[int]] = {}
    for member, leader in members.items():
        groups.setdefault(leader, []).append(member)
    fields |= {f"g{leader}": ",".join(map(str, ix)) for leader, ix in groups.items()}
    return fields
