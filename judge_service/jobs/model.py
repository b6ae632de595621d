"""Jobs: what a job is, how its status follows from its counts, and the queue interface.

A job is a list of rollouts and one set of options. Each rollout is one queue
entry; a worker *begins* an entry (counting the delivery, marking it running),
judges it, and *finishes* it: the result is written first-write-wins and the
entry acknowledged in the same atomic step. So a rollout has exactly one
result however often it is delivered; a delivery whose result already exists
is only acknowledged. A groupwise job's group is one entry, its leader's
(`jobs.groups`), holding one judging slot per rollout (`Entry.slots`: workers
claim by slots); beginning it marks the whole group running and makes the
worker its holder; the group's results are written provisionally
(`write_members`: bounded calls, hidden from pages and counts while the rollout
runs, written only by the holder), then the group is committed in one step, its
results counted, its block and its acknowledgement (`finish_group`).

`JobStore` has two implementations: Redis Streams (`jobs.queue`, shared by
any number of workers) and in-process (`jobs.memory_queue`, for
``judge-service serve`` without Redis). They behave alike; the tests run the
same cases against both.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from judge_service.errors import StoreUnavailable
from judge_service.schemas import JobCounts, JobState, JobView, Result

log = logging.getLogger(__name__)
T = TypeVar("T")

CANCELLED = "C"  # the stored marker of a rollout cancelled before it started
FinishKind = Literal["done", "failed", "cancelled", "dead"]
# A group member's index, result JSON (None: its provisional one, `write_members`), kind.
GroupWrite = tuple[int, str | None, FinishKind]
BeginKind = Literal["go", "done", "gone", "cancelled", "dead"]


def new_job_id() -> str:
    return "job_" + uuid.uuid4().hex


def queued_age_s(entry_id: str, now_ms: int) -> float:
    """Seconds since the entry was queued: a stream entry's id begins with the time (ms)
    Redis added it, and the in-process queue makes its ids the same way."""
    return max(0.0, (now_ms - int(entry_id.partition("-")[0])) / 1000)


@dataclass(frozen=True)
class Entry:
    """One delivery of one rollout of a job (`id` is the queue's entry id)."""

    id: str
    job: str
    index: int
    size: int = 1  # the rollouts it stands for: a groupwise job's leader's, its group's

    def slots(self, cap: int | None) -> int:
        """The judging slots it holds in a worker: one for each rollout of its group (each
        member's session holds one, `jobs.groups`), at most `cap`, the worker's all."""
        return max(1, self.size if cap is None else min(self.size, cap))


class Claimed(list[Entry]):
    """Entries claimed, in queue order. `full`: the next queued entry needs more slots
    than were offered, so the claim returned at once instead of waiting for new entries
    (the worker waits for one of its own to finish)."""

    full = False


def fitting(sizes: Sequence[int], slots: int, cap: int | None) -> int:
    """How many of the entries of `sizes`, in order, fit in `slots` (`Entry.slots`)."""
    used = taken = 0
    for size in sizes:
        used += Entry("", "", 0, size).slots(cap)
        if used > slots:
            break
        taken += 1
    return taken


@dataclass(frozen=True)
class Begin:
    """What a worker should do with an entry it was handed.

    go: judge it (`payload` is the rollout and its advantage); done: a result exists,
    only acknowledge; gone: the job expired; cancelled: the job was cancelled; dead:
    it was delivered `attempts` times without finishing (`last_error`), dead-letter it.
    """

    kind: BeginKind
    attempts: int = 0
    payload: str | None = None
    last_error: str | None = None


@dataclass(frozen=True)
class Takeover:
    """Entries claimed from dead workers (`owners[i]` held `entries[i]`), and the dead
    workers' consumer names removed from the group."""

    entries: list[Entry] = field(default_factory=list)
    owners: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class QueueStats:
    """The queue as every process sees it (the jobs gauges in `metrics`)."""

    queued: int  # entries not delivered to any worker yet
    pending: dict[str, int]  # consumer -> entries delivered and not acknowledged
    jobs: dict[str, int]  # status -> jobs (finished ones until their TTL)
    dead_letters: int  # records in the dead-letter list
    heartbeat_age_s: dict[str, float]  # consumer -> seconds since its last heartbeat
    oldest_pending_age_s: float = 0.0  # since the oldest delivered, unfinished one was queued
    oldest_queued_age_s: float = 0.0  # the oldest undelivered one's wait so far


@dataclass(frozen=True)
class JobRecord:
    id: str
    tenant: str
    total: int
    status: JobState
    options: str  # Options as JSON
    created_at: float
    finished_at: float | None
    done: int
    failed: int
    cancelled: int
    dead: int
    running: int

    def view(self) -> JobView:
        finished = self.done + self.failed + self.cancelled
        running = min(self.running, self.total - finished)
        return JobView(
            id=self.id,
            status=self.status,
            counts=JobCounts(
                total=self.total,
                queued=max(0, self.total - finished - running),
                running=running,
                done=self.done,
                failed=self.failed,
                cancelled=self.cancelled,
                dead_lettered=self.dead,
            ),
            created_at=self.created_at,
            finished_at=self.finished_at,
        )


def final_status(record_status: str, total: int, failed: int) -> JobState:
    """A job's status once every rollout has a result (both stores use this rule)."""
    if record_status == "cancelled":
        return "cancelled"
    return "failed" if failed >= total else "done"


def cancelled_result(rollout_id: str) -> Result:
    return Result(
        id=rollout_id,
        status="failed",
        error="cancelled: the job was cancelled before this rollout was judged",
    )


def dead_letter_result(rollout_id: str, attempts: int, last_error: str | None) -> Result:
    why = last_error or (
        "none recorded: the worker holding it stopped (killed, crashed or out of memory) "
        "before it finished"
    )
    return Result(
        id=rollout_id,
        status="failed",
        error=f"dead-letter: gave up after {attempts} deliveries; last error: {why}",
    )


async def until_ok(step: Callable[[], Awaitable[T]], stop: asyncio.Event | None = None) -> T:
    """Run a store step, retrying while the store is unavailable (until `stop` is set)."""
    backoff = 0.1
    while True:
        try:
            return await step()
        except StoreUnavailable as exc:
            if stop is not None and stop.is_set():
                raise
            log.warning("store unavailable (%s); retrying in %.1f s", exc, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)


def dead_letter_record(
    entry: Entry,
    tenant: str,
    attempts: int,
    last_error: str | None,
    at: float,
    group: Sequence[int] | None = None,
) -> str:
    record: dict[str, object] = {
        "job": entry.job,
        "index": entry.index,
        "entry": entry.id,
        "tenant": tenant,
        "attempts": attempts,
        "last_error": last_error,
        "at": at,
    }
    if group is not None:  # a group's one entry: every index that died with it
        record["group"] = list(group)
    return json.dumps(record)


class JobStore(ABC):
    shared: bool  # True when other processes (workers) can see the same jobs

    @abstractmethod
    async def ensure_queue(self) -> None:
        """Create the queue (stream and consumer group) if it is missing."""

    @abstractmethod
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
        """Create a job and enqueue its rollouts atomically; (job id, created). With a known
        idempotency key: that job, not created; raises IdempotencyConflict if the
        fingerprint differs. `members`: index -> its group's first index, for the rollouts
        judged with a group (options.groupwise): only the first is queued, and its worker
        writes every member's result."""

    @abstractmethod
    async def payloads(self, job_id: str, indices: Sequence[int]) -> list[str | None]:
        """The stored payloads of `indices` (None where there is none)."""

    @abstractmethod
    async def get(self, job_id: str) -> JobRecord | None: ...

    @abstractmethod
    async def result_slice(self, job_id: str, start: int, limit: int) -> list[str | None]:
        """Stored results of indices start.. (None where there is none yet)."""

    @abstractmethod
    async def ids(self, job_id: str, start: int, stop: int) -> list[str]:
        """Rollout ids of indices start..stop-1."""

    @abstractmethod
    async def cancel(self, job_id: str) -> None:
        """Mark the job cancelled; rollouts not started get a cancelled result."""

    @abstractmethod
    async def claim(
        self, consumer: str, count: int, block_s: float, cap: int | None = None
    ) -> Claimed:
        """New entries for `consumer`, in queue order, holding at most `count` judging
        slots between them (`Entry.slots(cap)`: a group holds one per rollout), waiting
        up to `block_s` for one while none is queued; at once, `full`, when the next one
        does not fit."""

    @abstractmethod
    async def take_over(
        self, consumer: str, dead_after_s: float, count: int, cap: int | None = None
    ) -> Takeover:
        """Entries of consumers whose heartbeat is older than `dead_after_s`, holding at
        most `count` slots (as `claim`), now delivered to `consumer`; such consumers with
        nothing left are removed."""

    @abstractmethod
    async def adopt(self, consumer: str) -> list[Entry]:
        """Entries still pending under `consumer` from an earlier process of the same name,
        delivered again to it (no one else takes them: that name's heartbeat is fresh)."""

    @abstractmethod
    async def reclaim(
        self, consumer: str, min_idle_s: float, count: int, cap: int | None = None
    ) -> list[Entry]:
        """Entries of consumers with no heartbeat record, unacknowledged for `min_idle_s`
        or more, holding at most `count` slots (as `claim`), now delivered to `consumer`
        (the last resort)."""

    @abstractmethod
    async def begin(self, entry: Entry, consumer: str, max_deliveries: int) -> Begin: ...

    @abstractmethod
    async def finish(
        self,
        entry: Entry,
        result: str,
        kind: FinishKind,
        dead_record: str | None = None,
        *,
        keep_payload: bool = False,
    ) -> bool:
        """Write the result unless one exists, update the counts, acknowledge the entry:
        atomically. True if this call wrote the result. `keep_payload`: the payload stays
        (no caller in this version needs it: a group is written by `finish_group`)."""

    @abstractmethod
    async def write_members(
        self, entry: Entry, consumer: str, writes: Sequence[tuple[int, str]]
    ) -> int:
        """Provisional results of the group whose leader's entry is `entry` (the
        leader's too), written only while `consumer` holds the group and tagged as its:
        not shown, not counted, overwritten by a later judging, until `finish_group`
        commits them. 1 if written; 0 if the group is not `consumer`'s any more
        (committed, released or taken over: leave it), -1 if the job is gone."""

    @abstractmethod
    async def finish_group(
        self,
        entry: Entry,
        writes: Sequence[GroupWrite],
        record: str | None = None,
        dead_record: str | None = None,
        *,
        holder: str | None = None,
    ) -> int:
        """`finish` for a group, its leader's `entry`, in one atomic step: every result of
        `writes` committed and counted (a rollout no longer running that has a result,
        the cancelled marker, keeps it), the group's `record` (`group_records`; written
        with the leader's result), the acknowledgement. `holder`: the consumer whose
        judging this is; it commits only while that consumer still holds the group (one
        paused past its lease, whose group was begun again by another, commits nothing
        and leaves the entry to the taker). None for a cancel or a dead letter. How many
        results this call committed: 0 when the group was committed already or is not
        the holder's, -1 when the job is gone. Raises (nothing done) when a provisional
        result it names is missing."""

    @abstractmethod
    async def group_records(self, job_id: str, start: int, stop: int) -> list[str]:
        """The stored records of the groups whose leader is one of start..stop-1, in
        index order (`jobs.groups.group_record`)."""

    @abstractmethod
    async def release(self, entry: Entry, consumer: str) -> bool:
        """Give back an entry `consumer` will not finish (it is stopping): enqueue it again
        for anyone, without counting the delivery. Nothing (False) when the entry is no
        longer pending under `consumer`: taken over, it is the taker's delivery."""

    @abstractmethod
    async def record_error(self, entry: Entry, error: str) -> None:
        """Remember why this delivery failed (the entry stays unacknowledged)."""

    @abstractmethod
    async def ack(self, entry: Entry) -> None: ...

    @abstractmethod
    async def heartbeat(self, consumer: str, external: bool = True) -> None:
        """A worker says it is alive (`external`: a separate process, not `serve`'s)."""

    @abstractmethod
    async def retire(self, consumer: str) -> None:
        """A worker stopped cleanly: forget it, unless it still holds entries."""

    @abstractmethod
    async def live_workers(self, within_s: float) -> list[str]:
        """Separate workers with a heartbeat in the last `within_s` seconds."""

    @abstractmethod
    async def snapshot(self) -> QueueStats: ...

    @abstractmethod
    async def resume_creations(self, older_than_s: float) -> int:
        """Finish queueing the entries of jobs whose creation stopped half way (the process
        creating them died) `older_than_s` ago or more; how many jobs were resumed."""

    @abstractmethod
    async def dead_letters(self, limit: int = 100) -> list[str]:
        """The newest dead-letter records (JSON)."""

    @abstractmethod
    async def pending(self, consumer: str | None = None) -> int:
        """Entries delivered and not acknowledged (of one consumer, or of all)."""
