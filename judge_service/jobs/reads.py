"""The Redis job store's reads: a job's record, results, ids, payloads and group records,
and the queue's live workers, dead letters and pending entries. None of them changes
anything, so none needs a script."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from judge_service.jobs.model import JobRecord
from judge_service.jobs.parts import CALL_BYTES, PART_BYTES, by_size, part_fields
from judge_service.store.redis_conn import GROUP, Keys, RedisConnection


class RedisJobReads:
    """Mixed into `jobs.queue.RedisJobStore`, which sets `conn` and `keys`."""

    conn: RedisConnection
    keys: Keys

    async def get(self, job_id: str) -> JobRecord | None:
        fields = ("tenant", "total", "status", "options", "created_at", "finished_at")
        counts = ("done", "failed", "cancelled", "dead")

        async def read(r: Any) -> list[Any]:
            async with r.pipeline(transaction=False) as pipe:
                pipe.hmget(self.keys.job(job_id), [*fields, *counts])
                pipe.hlen(self.keys.job(job_id, "run"))
                result: list[Any] = await pipe.execute()
                return result

        values, running = await self.conn.run(read)
        if values[0] is None:
            return None
        tenant, total, status, options, created, finished, *numbers = values
        done, failed, cancelled, dead = (int(n or 0) for n in numbers)
        return JobRecord(
            id=job_id,
            tenant=tenant,
            total=int(total),
            status=status,
            options=options,
            created_at=float(created),
            finished_at=None if finished is None else float(finished),
            done=done,
            failed=failed,
            cancelled=cancelled,
            dead=dead,
            running=int(running),
        )

    async def result_slice(self, job_id: str, start: int, limit: int) -> list[str | None]:
        fields = [str(i) for i in range(start, start + limit)]
        if not fields:
            return []
        out, run = self.keys.job(job_id, "out"), self.keys.job(job_id, "run")

        async def sizes(r: Any) -> list[Any]:
            async with r.pipeline(transaction=False) as pipe:
                for name in fields:
                    pipe.hstrlen(out, name)
                pipe.hmget(run, fields)
                result: list[Any] = await pipe.execute()
                return result

        *lengths, running = await self.conn.run(sizes)
        # A running index's result is a group member's provisional one (`write_members`).
        wanted = {
            name: int(size)
            for name, size, held in zip(fields, lengths, running, strict=True)
            if size and held is None
        }
        found = await self._bounded(out, wanted)
        shown = [found.get(name) for name in fields]
        return await self._joined(job_id, start, shown)

    async def _bounded(self, key: str, sizes: dict[str, int]) -> dict[str, str | None]:
        """The fields of `sizes` (name -> bytes) of hash `key`, read in round trips of at
        most CALL_BYTES (one field at least). Redis runs a client's pipelined commands back
        to back, so pipelining every read of a page would hold it for all of them: each
        round trip waits for the last, and Redis serves other clients between them."""
        values: dict[str, str | None] = {}
        for names in by_size(sizes, CALL_BYTES):
            got = await self.conn.run(lambda r, n=names: r.hmget(key, n))  # type: ignore[misc]
            values.update(zip(names, got, strict=True))
        return values

    async def _joined(self, job_id: str, start: int, shown: list[str | None]) -> list[str | None]:
        """`shown` with each marker replaced by its result, read back part by part (None if a
        part is missing: the job expired meanwhile)."""
        wanted = {k: part_fields(start + k, v) for k, v in enumerate(shown)}
        names = [name for found in wanted.values() if found for name in found]
        if not names:
            return shown
        parts = await self._bounded(
            self.keys.job(job_id, "parts"), dict.fromkeys(names, PART_BYTES)
        )
        for k, found in wanted.items():
            if found:
                pieces = [parts.get(name) for name in found]
                shown[k] = None if None in pieces else "".join(pieces)  # type: ignore[arg-type]
        return shown

    async def ids(self, job_id: str, start: int, stop: int) -> list[str]:
        values: list[str] = await self.conn.run(
            lambda r: r.lrange(self.keys.job(job_id, "ids"), start, stop - 1)
        )
        return values

    async def payloads(self, job_id: str, indices: Sequence[int]) -> list[str | None]:
        key = self.keys.job(job_id, "in")
        return list(await self.conn.run(lambda r: r.hmget(key, [str(i) for i in indices])))

    async def group_records(self, job_id: str, start: int, stop: int) -> list[str]:
        fields = [str(i) for i in range(start, stop)]
        if not fields:
            return []
        values: list[str | None] = await self.conn.run(
            lambda r: r.hmget(self.keys.job(job_id, "groups"), fields)
        )
        return [v for v in values if v is not None]

    async def live_workers(self, within_s: float) -> list[str]:
        since = time.time() - within_s
        names: list[str] = await self.conn.run(
            lambda r: r.zrangebyscore(self.keys.workers, since, "+inf")
        )
        return names

    async def dead_letters(self, limit: int = 100) -> list[str]:
        records: list[str] = await self.conn.run(lambda r: r.lrange(self.keys.dead, -limit, -1))
        return records

    async def pending(self, consumer: str | None = None) -> int:
        summary = await self.conn.run(lambda r: r.xpending(self.keys.stream, GROUP))
        if consumer is None:
            return int(summary["pending"])
        counts = {c["name"]: int(c["pending"]) for c in summary["consumers"] or []}
        return counts.get(consumer, 0)
