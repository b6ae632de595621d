"""Jobs in this process: the same semantics as the Redis queue, for ``serve`` without Redis.

Everything runs on one event loop and no method awaits in the middle of a state
change, so each method is atomic like its Lua counterpart. Jobs live as long as
the process (finished ones are dropped after ``JUDGE_JOB_TTL_S``).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from judge_service.errors import IdempotencyConflict
from judge_service.jobs.model import (
    CANCELLED,
    Begin,
    Claimed,
    Entry,
    FinishKind,
    GroupWrite,
    JobRecord,
    JobStore,
    QueueStats,
    Takeover,
    final_status,
    fitting,
    new_job_id,
    queued_age_s,
)


@dataclass
class _Job:
    id: str
    tenant: str
    options: str
    fingerprint: str
    ids: list[str]
    payloads: dict[int, str]
    created_at: float
    status: str = "queued"
    finished_at: float | None = None
    counts: dict[str, int] = field(
        default_factory=lambda: {"done": 0, "failed": 0, "cancelled": 0, "dead": 0}
    )
    out: dict[int, str] = field(default_factory=dict)
    run: dict[int, str] = field(default_factory=dict)
    tries: dict[int, int] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    groups: dict[int, list[int]] = field(default_factory=dict)  # leader -> its members
    records: dict[int, str] = field(default_factory=dict)  # leader -> group record
    prov: dict[int, str] = field(default_factory=dict)  # provisional result -> its writer

    def committed(self, index: int) -> bool:
        """A result that is still running is provisional (a group's), not committed."""
        return index in self.out and index not in self.run

    @property
    def finished(self) -> int:
        return self.counts["done"] + self.counts["failed"] + self.counts["cancelled"]


class MemoryJobStore(JobStore):
    shared = False

    def __init__(self, *, ttl_s: int) -> None:
        self.ttl_s = ttl_s
        self._jobs: dict[str, _Job] = {}
        self._idem: dict[tuple[str, str], tuple[str, str]] = {}
        self._new: deque[Entry] = deque()
        self._pending: dict[str, tuple[Entry, str, float]] = {}  # id -> entry, consumer, at
        self._dead: list[str] = []
        self._seq = itertools.count()
        self._arrived: asyncio.Event | None = None

    def _entry_id(self) -> str:
        """Ids in Redis's form (ms-seq), so the queue's ages read the same from both."""
        return f"{time.time_ns() // 1_000_000}-{next(self._seq)}"

    def _event(self) -> asyncio.Event:
        if self._arrived is None:  # created on first use, inside the serving loop
            self._arrived = asyncio.Event()
        return self._arrived

    async def ensure_queue(self) -> None:
        return None

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
        self._expire()
        if idempotency_key is not None and (tenant, idempotency_key) in self._idem:
            job_id, stored = self._idem[(tenant, idempotency_key)]
            if job_id in self._jobs:
                if stored != fingerprint:
                    raise IdempotencyConflict(job_id)
                return job_id, False
        job = _Job(
            id=new_job_id(),
            tenant=tenant,
            options=options,
            fingerprint=fingerprint,
            ids=list(ids),
            payloads=dict(enumerate(payloads)),
            created_at=time.time(),
        )
        for member, leader in (members or {}).items():
            job.groups.setdefault(leader, []).append(member)
        self._jobs[job.id] = job
        if idempotency_key is not None:
            self._idem[(tenant, idempotency_key)] = (job.id, fingerprint)
        for index in range(len(ids)):
            if members is None or index not in members:
                self._new.append(self._entry(job, index))
        self._event().set()
        return job.id, True

    def _entry(self, job: _Job, index: int) -> Entry:
        """A new entry for rollout `index`: a leader's stands for its whole group."""
        return Entry(self._entry_id(), job.id, index, 1 + len(job.groups.get(index, ())))

    def _expire(self) -> None:
        horizon = time.time() - self.ttl_s
        for job_id in [j.id for j in self._jobs.values() if (j.finished_at or 1e300) < horizon]:
            del self._jobs[job_id]

    async def get(self, job_id: str) -> JobRecord | None:
        job = self._jobs.get(job_id)
        if job is None:
            return None
        return JobRecord(
            id=job.id,
            tenant=job.tenant,
            total=len(job.ids),
            status=job.status,  # type: ignore[arg-type]
            options=job.options,
            created_at=job.created_at,
            finished_at=job.finished_at,
            running=len(job.run),
            **job.counts,
        )

    async def result_slice(self, job_id: str, start: int, limit: int) -> list[str | None]:
        job = self._jobs.get(job_id)
        if job is None:
            return [None] * limit
        # A running index's result is a group member's provisional one (`write_members`).
        indices = range(start, start + limit)
        return [None if i in job.run else job.out.get(i) for i in indices]

    async def ids(self, job_id: str, start: int, stop: int) -> list[str]:
        job = self._jobs.get(job_id)
        return [] if job is None else job.ids[start:stop]

    async def cancel(self, job_id: str) -> None:
        job = self._jobs.get(job_id)
        if job is None or job.status in ("done", "failed", "cancelled"):
            return
        job.status = "cancelled"
        for index in range(len(job.ids)):
            if index not in job.out and index not in job.run:
                job.out[index] = CANCELLED
                job.counts["cancelled"] += 1
        self._maybe_finished(job)

    async def claim(
        self, consumer: str, count: int, block_s: float, cap: int | None = None
    ) -> Claimed:
        if not self._new and block_s > 0:
            event = self._event()
            event.clear()
            try:
                await asyncio.wait_for(event.wait(), block_s)
            except TimeoutError:
                return Claimed()
        claimed = Claimed()
        sizes = [e.size for e in itertools.islice(self._new, count)]
        for _ in range(fitting(sizes, count, cap)):
            entry = self._new.popleft()
            self._pending[entry.id] = (entry, consumer, time.monotonic())
            claimed.append(entry)
        claimed.full = not claimed and bool(self._new)
        return claimed

    async def take_over(
        self, consumer: str, dead_after_s: float, count: int, cap: int | None = None
    ) -> Takeover:
        return Takeover()  # one process, one worker: no other consumer can die alone

    async def adopt(self, consumer: str) -> list[Entry]:
        return []  # the queue dies with its process: no earlier process left entries

    async def reclaim(
        self, consumer: str, min_idle_s: float, count: int, cap: int | None = None
    ) -> list[Entry]:
        now = time.monotonic()
        idle = [entry for entry, _, at in self._pending.values() if now - at >= min_idle_s]
        claimed = idle[: fitting([e.size for e in idle], count, cap)]
        for entry in claimed:
            self._pending[entry.id] = (entry, consumer, now)
        return claimed

    async def begin(self, entry: Entry, consumer: str, max_deliveries: int) -> Begin:
        job = self._jobs.get(entry.job)
        if job is None:
            return Begin("gone")
        if job.committed(entry.index):
            return Begin("done")
        if job.status == "cancelled":
            return Begin("cancelled")
        attempts = job.tries[entry.index] = job.tries.get(entry.index, 0) + 1
        if attempts > max_deliveries:
            return Begin("dead", attempts=attempts - 1, last_error=job.errors.get(entry.index))
        job.run[entry.index] = consumer
        for member in (entry.index, *job.groups.get(entry.index, ())):
            if member not in job.out or member in job.run:
                if member in job.prov:  # an earlier holder's: the group is judged again
                    del job.out[member], job.prov[member]
                job.run[member] = consumer
        if job.status == "queued":
            job.status = "running"
        return Begin("go", attempts=attempts, payload=job.payloads[entry.index])

    async def payloads(self, job_id: str, indices: Sequence[int]) -> list[str | None]:
        job = self._jobs.get(job_id)
        return [None if job is None else job.payloads.get(i) for i in indices]

    async def finish(
        self,
        entry: Entry,
        result: str,
        kind: FinishKind,
        dead_record: str | None = None,
        *,
        keep_payload: bool = False,
    ) -> bool:
        self._pending.pop(entry.id, None)
        job = self._jobs.get(entry.job)
        if job is None:
            return False
        job.run.pop(entry.index, None)
        if entry.index in job.out:
            return False
        job.out[entry.index] = result
        self._count(job, kind, dead_record or "")
        self._settle(job)
        return True

    async def finish_group(
        self,
        entry: Entry,
        writes: Sequence[GroupWrite],
        record: str | None = None,
        dead_record: str | None = None,
        *,
        holder: str | None = None,
    ) -> int:
        job = self._jobs.get(entry.job)
        if job is not None and not job.committed(entry.index):
            if holder is not None and job.run.get(entry.index) != holder:
                return 0  # begun again by another: the entry is the taker's (FINISH_GROUP)
            for i, result, _ in writes:
                tag = job.prov.get(i)
                if result is None and (tag is None or holder not in (None, tag)):
                    raise LookupError(f"{entry.job}[{entry.index}]: no provisional result {i}")
        self._pending.pop(entry.id, None)
        if job is None:
            return -1
        if job.committed(entry.index):
            return 0
        written, dead = 0, False
        for index, result, kind in writes:
            if job.run.pop(index, None) is None and index in job.out:
                continue
            job.prov.pop(index, None)
            if result is not None:
                job.out[index] = result
            first_dead = kind == "dead" and not dead  # the group is one entry: one record
            self._count(job, kind, (dead_record or "") if first_dead else None)
            dead = dead or first_dead
            if index == entry.index and record is not None:
                job.records[index] = record
            written += 1
        if written:
            self._settle(job)
        return written

    async def write_members(
        self, entry: Entry, consumer: str, writes: Sequence[tuple[int, str]]
    ) -> int:
        job = self._jobs.get(entry.job)
        if job is None:
            return -1
        if job.run.get(entry.index) != consumer:
            return 0
        for index, result in writes:
            if job.run.get(index) == consumer:
                job.out[index], job.prov[index] = result, consumer
        return 1

    def _count(self, job: _Job, kind: FinishKind, dead_record: str | None) -> None:
        if kind == "dead":
            job.counts["dead"] += 1
            job.counts["failed"] += 1
            if dead_record is not None:
                self._dead = [*self._dead[-9999:], dead_record]
        else:
            job.counts[kind] += 1

    def _settle(self, job: _Job) -> None:
        if job.status == "queued":
            job.status = "running"
        self._maybe_finished(job)

    async def group_records(self, job_id: str, start: int, stop: int) -> list[str]:
        job = self._jobs.get(job_id)
        if job is None:
            return []
        return [job.records[i] for i in range(start, stop) if i in job.records]

    def _maybe_finished(self, job: _Job) -> None:
        if job.finished >= len(job.ids) and job.finished_at is None:
            job.status = final_status(job.status, len(job.ids), job.counts["failed"])
            job.finished_at = time.time()
            job.payloads.clear()
            job.run.clear()

    async def release(self, entry: Entry, consumer: str) -> bool:
        held = self._pending.get(entry.id)
        if held is None or held[1] != consumer:  # taken over: the taker's delivery
            return False
        del self._pending[entry.id]
        job = self._jobs.get(entry.job)
        if job is not None and not job.committed(entry.index):
            for index in (entry.index, *job.groups.get(entry.index, ())):
                if job.run.pop(index, None) is not None and index in job.prov:
                    del job.out[index], job.prov[index]  # judged again with the group
            job.tries[entry.index] = max(0, job.tries.get(entry.index, 0) - 1)
            self._new.append(self._entry(job, entry.index))
            self._event().set()
        return True

    async def record_error(self, entry: Entry, error: str) -> None:
        job = self._jobs.get(entry.job)
        if job is not None:
            job.errors[entry.index] = error[:2000]

    async def ack(self, entry: Entry) -> None:
        self._pending.pop(entry.id, None)

    async def heartbeat(self, consumer: str, external: bool = True) -> None:
        return None  # no separate worker can reach an in-process queue

    async def retire(self, consumer: str) -> None:
        return None

    async def resume_creations(self, older_than_s: float) -> int:
        return 0  # a creation here is one step: it never stops half way

    async def snapshot(self) -> QueueStats:
        pending: dict[str, int] = {}
        for _, consumer, _ in self._pending.values():
            pending[consumer] = pending.get(consumer, 0) + 1
        jobs = dict.fromkeys(("queued", "running", "cancelling", "done", "failed", "cancelled"), 0)
        for job in self._jobs.values():
            unfinished = job.status == "cancelled" and job.finished_at is None
            jobs["cancelling" if unfinished else job.status] += 1
        now_ms = time.time_ns() // 1_000_000
        ages = [queued_age_s(entry_id, now_ms) for entry_id in self._pending]
        return QueueStats(
            queued=len(self._new),
            pending=pending,
            jobs=jobs,
            dead_letters=len(self._dead),
            heartbeat_age_s={},
            oldest_pending_age_s=max(ages, default=0.0),
            oldest_queued_age_s=queued_age_s(self._new[0].id, now_ms) if self._new else 0.0,
        )

    async def live_workers(self, within_s: float) -> list[str]:
        return []

    async def dead_letters(self, limit: int = 100) -> list[str]:
        return self._dead[-limit:]

    async def pending(self, consumer: str | None = None) -> int:
        return sum(1 for _, c, _ in self._pending.values() if consumer in (None, c))
