"""The Redis job store's writes of a group (options.groupwise, `jobs.groups`): its members'
provisional results (WRITE_MEMBERS, bounded calls) and its commit (FINISH_GROUP, one
atomic step). Mixed into `jobs.queue.RedisJobStore`, which registers the scripts."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from judge_service.jobs.model import Entry, GroupWrite
from judge_service.store.redis_conn import GROUP, Keys, RedisConnection


class RedisGroupWrites(ABC):
    conn: RedisConnection
    keys: Keys
    ttl_s: int
    _finish_group: Any  # the registered scripts
    _write_members: Any

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
        keys = self._job_keys(entry.job)
        args: list[str | int | float] = [entry.index, entry.id, GROUP, time.time(), self.ttl_s]
        args += [entry.job, record or "", dead_record or "", holder or ""]
        for index, result, kind in writes:
            args += [index, result or "", kind]
        done = int(await self.conn.run(lambda _: self._finish_group(keys=keys, args=args)))
        if done == -2:  # the delivery fails, and the group is judged again
            raise LookupError(f"{entry.job}[{entry.index}]: a member's result was not written")
        return done

    async def write_members(
        self, entry: Entry, consumer: str, writes: Sequence[tuple[int, str]]
    ) -> int:
        keys = [self.keys.job(entry.job, part) for part in ("", "out", "run")]
        args: list[str | int | float] = [entry.index, consumer, self.ttl_s]
        for index, result in writes:
            args += [index, result]
        return int(await self.conn.run(lambda _: self._write_members(keys=keys, args=args)))


def lead_fields(members: Mapping[int, int]) -> dict[str, str]:
    """The `lead` hash: each member's leader (ENQUEUE skips the members), and g<leader>:
    the leader's members (BEGIN and RELEASE mark them running and not)."""
    fields = {str(m): str(g) for m, g in members.items()}
    groups: dict[int, list[int]] = {}
    for member, leader in members.items():
        groups.setdefault(leader, []).append(member)
    fields |= {f"g{leader}": ",".join(map(str, ix)) for leader, ix in groups.items()}
    return fields
