"""Jobs on Redis: state in hashes, one Redis Streams entry per rollout, a consumer group.

Workers read new entries with ``XREADGROUP`` (an entry then sits in the
group's pending list under that worker's name) and acknowledge them with
``XACK`` in the same script that writes the result. A worker that dies leaves
its entries pending; its heartbeat goes stale and a live worker takes them over
within seconds (`jobs.failover`). Delivery is at-least-once; the result write is
first-write-wins and a finished judgment is in the cache, so a redelivery costs
no second judge session.

Creating and cancelling a job go `CHUNK` rollouts per call, never a whole job in
one script: Redis answers everyone else between chunks. A creation that died half
way is finished by a worker (`resume_creations`) or by a retry with the same
idempotency key.

Keys beside those listed in `store.redis_conn` (``P`` is the prefix)::

    P:job:{id} field enqueued         entries queued so far (creation is chunked)
    P:job:{id}:lead                   hash  groupwise: member index -> its leader's;
                                            g<leader> -> the leader's members ("3,5")
    P:job:{id}:groups                 hash  leader index -> group record (`jobs.groups`)
    P:job:{id}:prov                   hash  index -> the consumer that wrote its provisional
                                            result (`jobs.group_queue`)
    P:job:{id}:parts                  hash  <index>.<k> -> part k of a long group result
                                            (`jobs.parts`; `out` holds its marker)
    P:job:{id}:nparts                 hash  index -> how many parts its result has
    P:job:{id}:hold:{leader}          string the consumer holding the group (BEGIN)
    P:jobs:creating                   zset  job id -> created_at, until all are queued
    P:jobs:{status}                   zset  job id -> when it got there; statuses:
                                            queued running cancelling done failed
                                            cancelled (finished ones until the job TTL)
    P:beats                           zset  consumer -> last heartbeat (ms, Redis clock)
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from redis import exceptions as redis_errors

from judge_service.errors import IdempotencyConflict, StoreUnavailable
from judge_service.jobs import scripts
from judge_service.jobs.claims import CLAIM, RedisClaims
from judge_service.jobs.failover import RedisFailover
from judge_service.jobs.group_queue import RedisGroupWrites, lead_fields
from judge_service.jobs.model import (
    CANCELLED,
    Begin,
    Entry,
    FinishKind,
    JobStore,
    QueueStats,
    Takeover,
    new_job_id,
)
from judge_service.jobs.reads import RedisJobReads
from judge_service.store.redis_conn import GROUP, RedisConnection

# Rollouts per script call or command while creating or cancelling a job: about 1-3 ms of
# Redis time each (measured: 1,000 XADDs 2 ms, 1,000 cancel checks 5 ms), so no other
# client waits longer than that.
CHUNK = 500
_CHUNK_BYTES = 4 << 20  # and payload bytes per HSET: copying 4 MB is about a millisecond


class RedisJobStore(RedisJobReads, RedisGroupWrites, RedisClaims, JobStore):
    shared = True

    def __init__(
        self,
        conn: RedisConnection,
        *,
        ttl_s: int,
        wait_replicas: int = 0,
        wait_timeout_ms: int = 1000,
    ) -> None:
        self.conn = conn
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = wait_timeout_ms
        self._queue_made = False
        self.keys = conn.keys
        self.ttl_s = ttl_s
        self.failover = RedisFailover(conn, ttl_s)
        self.status_keys = self.failover.status_keys
        self.creating = f"{conn.keys.prefix}:jobs:creating"
        client = conn.client
        self._create = client.register_script(scripts.CREATE)
        self._enqueue_chunk = client.register_script(scripts.ENQUEUE)
        self._claim = client.register_script(CLAIM)
        self._begin = client.register_script(scripts.BEGIN)
        self._finish = client.register_script(scripts.FINISH)
        self._finish_group = client.register_script(scripts.FINISH_GROUP)
        self._cancel_start = client.register_script(scripts.CANCEL_START)
        self._cancel_range = client.register_script(scripts.CANCEL_RANGE)
        self._release = client.register_script(scripts.RELEASE)

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
        members: Mapping[int, int] | None = None,
    ) -> tuple[str, bool]:
        if not self._queue_made:
            # The group exists before any worker does: KEDA scaling workers up from zero
            # reads the group's lag, and a stream without the group has none to read.
            await self.ensure_queue()
            self._queue_made = True
        idem = self.keys.idempotency(tenant, idempotency_key or "")
        if idempotency_key is not None:
            holder: str | None = await self.conn.run(lambda r: r.get(idem))
            if holder is not None:
                return await self._replay(holder, fingerprint)
        job_id = new_job_id()
        upload, id_list = self.keys.job(job_id, "in"), self.keys.job(job_id, "ids")

        async def write(r: Any) -> None:
            # Uploaded before the job exists, so a crash here leaves only keys that expire.
            # Each command is one chunk; Redis serves other clients between commands.
            async with r.pipeline(transaction=False) as pipe:
                for start, stop in _chunks(payloads):
                    chunk = payloads[start:stop]
                    pipe.hset(upload, mapping={str(start + k): p for k, p in enumerate(chunk)})
                    pipe.rpush(id_list, *ids[start:stop])
                pipe.expire(upload, self.ttl_s)
                pipe.expire(id_list, self.ttl_s)
                if members:
                    pipe.hset(self.keys.job(job_id, "lead"), mapping=lead_fields(members))
                    pipe.expire(self.keys.job(job_id, "lead"), self.ttl_s)
                await pipe.execute()

        await self.conn.run(write)
        keys = [self.keys.job(job_id), idem, self.creating, *self.status_keys]
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
            await self.conn.run(lambda r: r.unlink(upload, id_list))
            return await self._replay(created, fingerprint)
        await self._enqueue(job_id, 0)
        await self._replicated(job_id)
        return job_id, True

    async def _replicated(self, job_id: str) -> None:
        """Return once `wait_replicas` replicas hold the job, else raise StoreUnavailable (a
        503: the client's retry with the same idempotency key waits again). Replication is
        asynchronous, so without this a failover right after the 202 can lose the job."""
        if not self.wait_replicas:
            return
        # A write of its own, never a job key: an HSET would bring back an expired job.
        mark = f"{self.keys.prefix}:replication-mark"

        async def write_and_wait(r: Any) -> int:
            # WAIT counts replicas that acknowledged this connection's last write, so the
            # write and the WAIT share one connection (a pipeline); the replication stream
            # is in order, so a replica that has this write has the whole job before it.
            async with r.pipeline(transaction=False) as pipe:
                pipe.set(mark, time.time(), ex=60)
                pipe.wait(self.wait_replicas, self.wait_timeout_ms)
                replies = await pipe.execute()
                return int(replies[-1])

        acked = await self.conn.run(write_and_wait)
        if acked < self.wait_replicas:
            raise StoreUnavailable(
                f"job {job_id} is on {acked} of {self.wait_replicas} replica(s) after "
                f"{self.wait_timeout_ms} ms (JUDGE_REDIS_WAIT_REPLICAS); retry with the same "
                "idempotency key"
            )

    async def _enqueue(self, job_id: str, start: int) -> None:
        """Queue the job's entries from `start`, a chunk per call; safe to run twice at once
        (each chunk is compare-and-set on the job's `enqueued`)."""
        keys = [
            self.keys.job(job_id),
            self.keys.stream,
            self.creating,
            self.keys.job(job_id, "lead"),
        ]
        at = start
        while at >= 0:
            args = [job_id, at, at + CHUNK]
            at = int(
                await self.conn.run(
                    lambda _, a=args: self._enqueue_chunk(keys=keys, args=a)  # type: ignore[misc]
                )
            )

    async def resume_creations(self, older_than_s: float) -> int:
        stalled: list[str] = await self.conn.run(
            lambda r: r.zrangebyscore(self.creating, "-inf", time.time() - older_than_s)
        )
        for job_id in stalled:
            key = self.keys.job(job_id)
            at = await self.conn.run(lambda r, k=key: r.hget(k, "enqueued"))  # type: ignore[misc]
            await self._enqueue(job_id, int(at or 0))
        return len(stalled)

    async def _replay(self, holder: str, fingerprint: str) -> tuple[str, bool]:
        job_id, _, stored = holder.partition(" ")
        if stored != fingerprint:
            raise IdempotencyConflict(job_id)
        # The first request may have died half way through queueing: this retry finishes it.
        at = await self.conn.run(lambda r: r.hget(self.keys.job(job_id), "enqueued"))
        if at is not None:  # (the chunk script returns at once when all are queued)
            await self._enqueue(job_id, int(at))
        await self._replicated(job_id)
        return job_id, False

    async def cancel(self, job_id: str) -> None:
        start_keys = [self.keys.job(job_id), *self.status_keys]
        total = int(
            await self.conn.run(
                lambda _: self._cancel_start(keys=start_keys, args=[job_id, time.time()])
            )
        )
        keys = self._job_keys(job_id)
        for start in range(0, max(total, 0), CHUNK):
            args = [start, min(start + CHUNK, total), time.time(), self.ttl_s, CANCELLED, job_id]
            await self.conn.run(
                lambda _, a=args: self._cancel_range(keys=keys, args=a)  # type: ignore[misc]
            )

    def _job_keys(self, job_id: str) -> list[str]:
        """KEYS of FINISH, FINISH_GROUP and CANCEL_RANGE."""
        job = self.keys.job
        return [
            job(job_id),
            job(job_id, "out"),
            job(job_id, "run"),
            self.keys.stream,
            self.keys.dead,
            job(job_id, "in"),
            job(job_id, "tries"),
            job(job_id, "errors"),
            job(job_id, "ids"),
            *self.status_keys,
            job(job_id, "groups"),
            job(job_id, "prov"),
            job(job_id, "parts"),
            job(job_id, "nparts"),
        ]

    async def take_over(
        self, consumer: str, dead_after_s: float, count: int, cap: int | None = None
    ) -> Takeover:
        return await self.failover.take_over(consumer, dead_after_s, count, cap)

    async def adopt(self, consumer: str) -> list[Entry]:
        return await self.failover.adopt(consumer)

    async def reclaim(
        self, consumer: str, min_idle_s: float, count: int, cap: int | None = None
    ) -> list[Entry]:
        return await self.failover.reclaim(consumer, min_idle_s, count, cap)

    async def begin(self, entry: Entry, consumer: str, max_deliveries: int) -> Begin:
        parts = ("", "out", "run", "tries", "errors", "in")
        keys = [*(self.keys.job(entry.job, part) for part in parts), *self.status_keys]
        keys.append(self.keys.job(entry.job, "lead"))
        keys.append(self.keys.job(entry.job, f"hold:{entry.index}"))
        args: list[str | int | float] = [
            entry.index,
            consumer,
            max_deliveries,
            self.ttl_s,
            entry.job,
            time.time(),
        ]
        reply = await self.conn.run(lambda _: self._begin(keys=keys, args=args))
        kind = reply[0]
        if kind == "go":
            return Begin("go", attempts=int(reply[1]), payload=reply[2])
        if kind == "dead":
            return Begin("dead", attempts=int(reply[1]), last_error=reply[2] or None)
        return Begin(kind)

    async def finish(
        self,
        entry: Entry,
        result: str,
        kind: FinishKind,
        dead_record: str | None = None,
        *,
        keep_payload: bool = False,
    ) -> bool:
        keys = self._job_keys(entry.job)
        args: list[str | int | float] = [
            entry.index,
            result,
            kind,
            entry.id,
            GROUP,
            time.time(),
            self.ttl_s,
        ]
        args += [dead_record or "", entry.job, "keep" if keep_payload else ""]
        written = await self.conn.run(lambda _: self._finish(keys=keys, args=args))
        return int(written) == 1

    async def release(self, entry: Entry, consumer: str) -> bool:
        keys = [
            self.keys.stream,
            self.keys.job(entry.job),
            self.keys.job(entry.job, "out"),
            self.keys.job(entry.job, "run"),
            self.keys.job(entry.job, "tries"),
            self.keys.job(entry.job, "lead"),
            self.keys.job(entry.job, f"hold:{entry.index}"),
            self.keys.job(entry.job, "prov"),
            self.keys.job(entry.job, "parts"),
            self.keys.job(entry.job, "nparts"),
        ]
        args: list[str | int | float] = [entry.id, GROUP, entry.job, entry.index, consumer]
        return int(await self.conn.run(lambda _: self._release(keys=keys, args=args))) == 1

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

    async def heartbeat(self, consumer: str, external: bool = True) -> None:
        await self.failover.heartbeat(consumer, external)

    async def retire(self, consumer: str) -> None:
        await self.failover.retire(consumer)

    async def snapshot(self) -> QueueStats:
        return await self.failover.snapshot()


def _chunks(payloads: Sequence[str]) -> list[tuple[int, int]]:
    """(start, stop) ranges of at most CHUNK payloads and about _CHUNK_BYTES each."""
    ranges, start, size = [], 0, 0
    for i, payload in enumerate(payloads):
        if i > start and (i - start >= CHUNK or size + len(payload) > _CHUNK_BYTES):
            ranges.append((start, i))
            start, size = i, 0
        size += len(payload)
    if start < len(payloads):
        ranges.append((start, len(payloads)))
    return ranges
