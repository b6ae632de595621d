"""Jobs on Redis: state in hashes, one Redis Streams entry per rollout, a consumer group.

Workers read new entries with ``XREADGROUP`` (an entry then sits in the
group's pending list under that worker's name) and acknowledge them with
``XACK`` in the same script that writes the result. A worker that dies leaves
its entries pending; any worker takes them over with ``XAUTOCLAIM`` once they
have been idle for ``JUDGE_JOBS_RECLAIM_IDLE_S``, longer than the longest judge
deadline, so a live worker's slow session is never taken from it. Delivery is
at-least-once; the result write is first-write-wins and a finished judgment is
in the cache, so a redelivery costs no second judge session.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from redis import exceptions as redis_errors

from judge_service.jobs import scripts
from judge_service.jobs.model import (
    CANCELLED,
    Begin,
    Entry,
    FinishKind,
    IdempotencyConflict,
    JobRecord,
    JobStore,
    new_job_id,
)
from judge_service.store.redis_conn import GROUP, RedisConnection

_CHUNK = 500  # rollouts per HSET while uploading a job
_TIDY_EVERY_S = 600.0
_FORGET_CONSUMER_S = 3600.0  # a consumer with nothing pending and idle this long is removed


class RedisJobStore(JobStore):
    shared = True

    def __init__(self, conn: RedisConnection, *, ttl_s: int) -> None:
        self.conn = conn
        self.keys = conn.keys
        self.ttl_s = ttl_s
        client = conn.client
        self._create = client.register_script(scripts.CREATE)
        self._begin = client.register_script(scripts.BEGIN)
        self._finish = client.register_script(scripts.FINISH)
        self._cancel = client.register_script(scripts.CANCEL)
        self._release = client.register_script(scripts.RELEASE)
        self._cursor = "0-0"
        self._next_tidy = 0.0

    async def ensure_queue(self) -> None:
        async def create(r: Any) -> None:
            try:
                await r.xgroup_create(self.keys.stream, GROUP, id="0", mkstream=True)
            except redis_errors.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise

        await self.conn.run(create)

    async def create(
        self,
        tenant: str,
        idempotency_key: str | None,
        fingerprint: str,
        options: str,
        ids: Sequence[str],
        payloads: Sequence[str],
    ) -> tuple[str, bool]:
        idem = self.keys.idempotency(tenant, idempotency_key or "")
        if idempotency_key is not None:
            holder: str | None = await self.conn.run(lambda r: r.get(idem))
            if holder is not None:
                return self._replay(holder, fingerprint)
        job_id = new_job_id()
        upload, id_list = self.keys.job(job_id, "in"), self.keys.job(job_id, "ids")

        async def write(r: Any) -> None:
            # Uploaded before the job exists, so a crash here leaves only keys that expire.
            async with r.pipeline(transaction=False) as pipe:
                for start in range(0, len(payloads), _CHUNK):
                    chunk = payloads[start : start + _CHUNK]
                    pipe.hset(upload, mapping={str(start + k): p for k, p in enumerate(chunk)})
                    pipe.rpush(id_list, *ids[start : start + _CHUNK])
                pipe.expire(upload, self.ttl_s)
                pipe.expire(id_list, self.ttl_s)
                await pipe.execute()

        await self.conn.run(write)
        keys = [self.keys.job(job_id), idem, self.keys.stream]
        args: list[str | int | float] = [
            job_id,
            tenant,
            len(ids),
            options,
            fingerprint,
            time.time(),
            self.ttl_s,
        ]
        args.append("1" if idempotency_key is not None else "0")
        created: str = await self.conn.run(lambda _: self._create(keys=keys, args=args))
        if created.split(" ", 1)[0] != job_id:  # another request with the same key won the race
            await self.conn.run(lambda r: r.delete(upload, id_list))
            return self._replay(created, fingerprint)
        return job_id, True

    @staticmethod
    def _replay(holder: str, fingerprint: str) -> tuple[str, bool]:
        job_id, _, stored = holder.partition(" ")
        if stored != fingerprint:
            raise IdempotencyConflict(job_id)
        return job_id, False

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
        values: list[str | None] = await self.conn.run(
            lambda r: r.hmget(self.keys.job(job_id, "out"), fields)
        )
        return values

    async def ids(self, job_id: str, start: int, stop: int) -> list[str]:
        values: list[str] = await self.conn.run(
            lambda r: r.lrange(self.keys.job(job_id, "ids"), start, stop - 1)
        )
        return values

    async def cancel(self, job_id: str) -> None:
        keys = [self.keys.job(job_id, part) for part in ("", "out", "run", "in", "tries", "errors")]
        args: list[str | int | float] = [time.time(), self.ttl_s, CANCELLED]
        await self.conn.run(lambda _: self._cancel(keys=keys, args=args))

    async def claim(self, consumer: str, count: int, block_s: float) -> list[Entry]:
        async def read(r: Any) -> Any:
            try:
                return await r.xreadgroup(
                    GROUP,
                    consumer,
                    {self.keys.stream: ">"},
                    count=count,
                    block=max(1, int(block_s * 1000)),
                )
            except redis_errors.ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                return None  # Redis lost the group (restarted without persistence)

        response = await self.conn.run(read)
        if response is None:
            await self.ensure_queue()
            return []
        return [e for _, messages in response for e in _entries(messages)]

    async def reclaim(self, consumer: str, min_idle_s: float, count: int) -> list[Entry]:
        claimed: list[Entry] = []
        idle_ms = int(min_idle_s * 1000)
        while len(claimed) < count:
            want = count - len(claimed)
            start = self._cursor
            response = await self.conn.run(
                lambda r, s=start, n=want: r.xautoclaim(  # type: ignore[misc]
                    self.keys.stream, GROUP, consumer, idle_ms, s, count=n
                )
            )
            self._cursor, messages = response[0], response[1]
            claimed += _entries(messages)
            if self._cursor == "0-0":
                await self._tidy()
                break
        return claimed

    async def _tidy(self) -> None:
        """Forget consumers of workers long gone (nothing pending), so XINFO stays short."""
        if time.monotonic() < self._next_tidy:
            return
        self._next_tidy = time.monotonic() + _TIDY_EVERY_S
        consumers = await self.conn.run(lambda r: r.xinfo_consumers(self.keys.stream, GROUP))
        for info in consumers:
            if info["pending"] == 0 and info["idle"] > _FORGET_CONSUMER_S * 1000:
                name = info["name"]
                await self.conn.run(
                    lambda r, n=name: r.xgroup_delconsumer(self.keys.stream, GROUP, n)  # type: ignore[misc]
                )

    async def begin(self, entry: Entry, consumer: str, max_deliveries: int) -> Begin:
        parts = ("", "out", "run", "tries", "errors", "in")
        keys = [self.keys.job(entry.job, part) for part in parts]
        args: list[str | int | float] = [entry.index, consumer, max_deliveries, self.ttl_s]
        reply = await self.conn.run(lambda _: self._begin(keys=keys, args=args))
        kind = reply[0]
        if kind == "go":
            return Begin("go", attempts=int(reply[1]), payload=reply[2])
        if kind == "dead":
            return Begin("dead", attempts=int(reply[1]), last_error=reply[2] or None)
        return Begin(kind)

    async def finish(
        self, entry: Entry, result: str, kind: FinishKind, dead_record: str | None = None
    ) -> bool:
        job = self.keys.job
        keys = [
            job(entry.job),
            job(entry.job, "out"),
            job(entry.job, "run"),
            self.keys.stream,
            self.keys.dead,
            job(entry.job, "in"),
            job(entry.job, "tries"),
            job(entry.job, "errors"),
            job(entry.job, "ids"),
        ]
        args: list[str | int | float] = [
            entry.index,
            result,
            kind,
            entry.id,
            GROUP,
            time.time(),
            self.ttl_s,
        ]
        args.append(dead_record or "")
        written = await self.conn.run(lambda _: self._finish(keys=keys, args=args))
        return int(written) == 1

    async def release(self, entry: Entry) -> None:
        keys = [
            self.keys.stream,
            self.keys.job(entry.job),
            self.keys.job(entry.job, "out"),
            self.keys.job(entry.job, "run"),
            self.keys.job(entry.job, "tries"),
        ]
        args: list[str | int | float] = [entry.id, GROUP, entry.job, entry.index]
        await self.conn.run(lambda _: self._release(keys=keys, args=args))

    async def record_error(self, entry: Entry, error: str) -> None:
        key = self.keys.job(entry.job, "errors")

        async def write(r: Any) -> None:
            async with r.pipeline(transaction=False) as pipe:
                pipe.hset(key, str(entry.index), error[:2000])
                pipe.expire(key, self.ttl_s)
                await pipe.execute()

        await self.conn.run(write)

    async def ack(self, entry: Entry) -> None:
        async def write(r: Any) -> None:
            async with r.pipeline(transaction=False) as pipe:
                pipe.xack(self.keys.stream, GROUP, entry.id)
                pipe.xdel(self.keys.stream, entry.id)
                await pipe.execute()

        await self.conn.run(write)

    async def heartbeat(self, consumer: str) -> None:
        now = time.time()

        async def write(r: Any) -> None:
            async with r.pipeline(transaction=False) as pipe:
                pipe.zadd(self.keys.workers, {consumer: now})
                pipe.zremrangebyscore(self.keys.workers, "-inf", now - _FORGET_CONSUMER_S)
                await pipe.execute()

        await self.conn.run(write)

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


def _entries(messages: Any) -> list[Entry]:
    entries = []
    for entry_id, fields in messages:
        if fields and "job" in fields:  # a deleted entry comes back without fields
            entries.append(Entry(entry_id, fields["job"], int(fields["i"])))
    return entries
