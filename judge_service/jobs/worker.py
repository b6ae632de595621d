"""A worker: takes rollouts off the job queue, judges them, writes each result once.

The loop keeps at most `concurrency` rollouts in flight and asks the queue for
entries by the judging slots it has free (a groupwise job's entry is a whole group,
holding one slot per rollout: `jobs.claims`), so an entry never waits inside a worker
behind other work, and groups spread over the workers. Before new entries it takes
over those of dead workers (a heartbeat older than `dead_after_s`, see
`jobs.failover`): they are the oldest work, and a trainer's step waits for them. Its
own heartbeat runs beside the loop (`jobs.pulse`), so its slow sessions are never
taken from it; in turn, entries pending under its own name that it is not judging
(left by an earlier process of the same name, or a claim whose reply was lost) are its
own to find, since no one else ever takes from a live name.

Store failures never lose work: each store step of a rollout is retried until
Redis answers again (an outage pauses the worker; its results wait in memory).
Any other failure is recorded as the rollout's last error and the rollout is
delivered again at once (after a short backoff), each time counted, until the
delivery limit sends it to the dead-letter list with that error: a poison rollout
costs seconds, not one reclaim time per delivery.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from dataclasses import dataclass

from judge_service import metrics
from judge_service.credit import GroupAdvantage
from judge_service.errors import StoreUnavailable
from judge_service.jobs.groups import GROUP_KEY, deliver_group, group_of
from judge_service.jobs.model import (
    CANCELLED,
    Entry,
    FinishKind,
    GroupWrite,
    JobStore,
    dead_letter_record,
    dead_letter_result,
    until_ok,
)
from judge_service.jobs.pulse import Pulse
from judge_service.pipeline import Engine
from judge_service.schemas import Options, Rollout
from judge_service.wire_json import dump_json_str

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerConfig:
    name: str
    concurrency: int
    reclaim_idle_s: float
    max_deliveries: int
    dead_after_s: float = 5.0  # a worker whose heartbeat is older is dead
    reclaim_every_s: float = 5.0  # the idle-time reclaim (last resort) and the orphan check
    external: bool = True  # a separate process (`serve` in auto mode steps aside for it)
    yield_to_external: bool = False  # the in-process worker of `serve` in auto mode
    drain_s: float = 30.0  # on stop, how long in-flight rollouts may still finish
    block_s: float = 1.0  # an idle worker waits this long for new entries (and for a stop)
    sample_every_s: float = 5.0  # the queue gauges are read this often
    retry_backoff_s: float = 0.2  # before the first redelivery of a rollout that raised

    @property
    def heartbeat_s(self) -> float:
        """Five heartbeats per `dead_after_s`: one lost write never makes a worker dead."""
        return self.dead_after_s / 5


class Worker:
    def __init__(self, engine: Engine, jobs: JobStore, config: WorkerConfig) -> None:
        self.engine = engine
        self.jobs = jobs
        self.config = config
        self.in_flight: dict[asyncio.Task[None], Entry] = {}
        self.judged = 0
        self.stopped = asyncio.Event()
        self._job_info: dict[str, tuple[Options, str]] = {}
        self._externals: tuple[float, bool] = (0.0, False)
        self._next_takeover = self._next_reclaim = 0.0
        self._backlog: list[Entry] = []
        self._outage_at = float("-inf")  # monotonic time this worker last failed to reach Redis
        self._pulse: Pulse | None = None

    async def run(self, stop: asyncio.Event) -> None:
        """Work until `stop` is set; then let in-flight rollouts finish (up to drain_s)."""
        config = self.config
        pulse = self._pulse = Pulse(
            self.jobs,
            config.name,
            external=config.external,
            heartbeat_s=config.heartbeat_s,
            sample_every_s=config.sample_every_s,
        )
        backoff = 0.1
        try:
            await until_ok(self.jobs.ensure_queue, stop)
            # Alive before claiming anything: an entry held without a heartbeat record could
            # be taken by the idle reclaim.
            await until_ok(pulse.beat, stop)
            pulse.start()
            # An earlier process with this name died holding entries: nobody else will take
            # them (this name's heartbeat is fresh again), so they come first.
            self._backlog = await until_ok(lambda: self.jobs.adopt(config.name), stop)
            self._next_reclaim = time.monotonic() + config.reclaim_every_s
            if self._backlog:
                log.warning(
                    "worker %s: %d rollout(s) left by an earlier process of this name",
                    config.name,
                    len(self._backlog),
                )
            while not stop.is_set():
                try:
                    if config.yield_to_external and await self._externals_alive():
                        await _wait(stop, 1.0)
                        continue
                    free = config.concurrency - self._held()
                    if free <= 0:
                        await self._wait_for_a_slot(1.0)
                        continue
                    # Each batch starts as soon as it is claimed: an entry claimed and then
                    # dropped by a failing next step would sit under this live name forever.
                    free -= await self._take_over(free)
                    if free > 0:
                        claimed = await self.jobs.claim(
                            config.name, free, config.block_s, config.concurrency
                        )
                        for entry in claimed:
                            self._start(entry)
                        if claimed.full:  # the next group waits for slots of this worker
                            await self._wait_for_a_slot(config.block_s)
                    backoff = 0.1
                except StoreUnavailable as exc:
                    self._outage_at = time.monotonic()
                    log.warning("worker %s: %s; retrying in %.1f s", config.name, exc, backoff)
                    await _wait(stop, backoff)
                    backoff = min(backoff * 2, 5.0)
        finally:
            await self._drain()  # still heartbeating: a draining worker is alive
            await pulse.stop()
            with contextlib.suppress(StoreUnavailable):
                await self.jobs.retire(config.name)
            self.stopped.set()

    def _held(self) -> int:
        """Judging slots held by the entries in flight (`Entry.slots`: a group, one for
        each of its rollouts)."""
        return sum(e.slots(self.config.concurrency) for e in self.in_flight.values())

    async def _wait_for_a_slot(self, timeout: float) -> None:
        if self.in_flight:
            await asyncio.wait(
                set(self.in_flight), timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )

    async def _take_over(self, free: int) -> int:
        """Start entries no live worker is judging, holding up to `free` slots; how many
        slots they hold. First what an earlier process of this name left, then dead
        workers' entries (checked every heartbeat interval, at once again while more are
        waiting), then, every few seconds, orphans of this worker and the idle-time last
        resort."""
        config = self.config
        cap = config.concurrency
        now = time.monotonic()
        started = 0
        while self._backlog and started + self._backlog[0].slots(cap) <= free:
            entry = self._backlog.pop(0)
            self._start(entry)
            started += entry.slots(cap)
        if started < free and now >= self._next_takeover and self._sure_of_deaths(now):
            want = free - started
            taken = await self.jobs.take_over(config.name, config.dead_after_s, want, cap)
            took = sum(e.slots(cap) for e in taken.entries)
            self._next_takeover = now if took >= want else now + config.heartbeat_s
            for entry in taken.entries:
                self._start(entry)
            started += took
            metrics.JOBS_RECLAIMS.labels("dead_consumer").inc(len(taken.entries))
            for owner in sorted(set(taken.owners)):
                log.warning(
                    "worker %s: took over %d rollout(s) of dead worker %s",
                    config.name,
                    taken.owners.count(owner),
                    owner,
                )
            for name in taken.removed:
                log.info("worker %s: removed dead worker %s from the group", config.name, name)
        if now >= self._next_reclaim:
            self._next_reclaim = now + config.reclaim_every_s
            await self._adopt_orphans()
            if started < free:
                idle = await self.jobs.reclaim(
                    config.name, config.reclaim_idle_s, free - started, cap
                )
                for entry in idle:
                    self._start(entry)
                started += sum(e.slots(cap) for e in idle)
                metrics.JOBS_RECLAIMS.labels("idle").inc(len(idle))
                if idle:
                    log.warning(
                        "worker %s: took over %d rollout(s) idle for %.0f s (no heartbeat)",
                        config.name,
                        len(idle),
                        config.reclaim_idle_s,
                    )
        return started

    def _sure_of_deaths(self, now: float) -> bool:
        """Whether stale heartbeats mean dead workers: not until this worker has reached
        Redis for `dead_after_s` without a failure. After an outage every heartbeat is
        stale; live workers need a moment to beat again, and must not lose their rollouts
        to whoever reconnected first."""
        failed = max(self._outage_at, self._pulse.beat_failed_at if self._pulse else 0.0)
        return now - failed >= self.config.dead_after_s

    async def _adopt_orphans(self) -> None:
        """Entries pending under this name that no task here is judging (a claim whose
        reply was lost on the way: Redis delivered, the connection dropped). No other
        worker would ever take them from a live name, so this one does."""
        held = len(self.in_flight) + len(self._backlog)
        if await self.jobs.pending(self.config.name) <= held:
            return
        known = {e.id for e in self.in_flight.values()} | {e.id for e in self._backlog}
        orphans = [e for e in await self.jobs.adopt(self.config.name) if e.id not in known]
        if orphans:
            log.warning("worker %s: %d orphaned rollout(s) found", self.config.name, len(orphans))
        self._backlog += orphans

    def _start(self, entry: Entry) -> None:
        task = asyncio.create_task(self._process(entry))
        self.in_flight[task] = entry
        metrics.JOBS_IN_FLIGHT.inc()
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        if self.in_flight.pop(task, None) is not None:
            metrics.JOBS_IN_FLIGHT.dec()

    async def _drain(self) -> None:
        if self.in_flight:
            await asyncio.wait(set(self.in_flight), timeout=self.config.drain_s)
        unfinished = dict(self.in_flight)
        for task in unfinished:
            task.cancel()
        if unfinished:
            await asyncio.wait(set(unfinished), timeout=5.0)
        for entry in unfinished.values():
            # Put it back at the end of the queue now, rather than leave it pending for the
            # reclaim time; if the store is down, the reclaim picks it up later anyway.
            try:
                await self.jobs.release(entry, self.config.name)
            except StoreUnavailable:
                log.warning(
                    "could not release %s[%d]; it will be reclaimed", entry.job, entry.index
                )

    async def _externals_alive(self) -> bool:
        now = time.monotonic()
        checked_at, alive = self._externals
        if now - checked_at >= 5.0:
            # By each host's clock (`workers`): generous, so that clock skew between
            # machines cannot make `serve` and the workers both think the other is gone.
            alive = bool(await self.jobs.live_workers(max(15.0, 3 * self.config.dead_after_s)))
            self._externals = (now, alive)
        return alive

    async def _process(self, entry: Entry) -> None:
        """Deliver the entry until it finishes: each try is counted by `begin`, so one that
        keeps raising reaches the dead-letter list after `max_deliveries` tries."""
        config = self.config
        backoff = config.retry_backoff_s
        # More tries than deliveries only when even dead-lettering fails (a broken job).
        for _ in range(config.max_deliveries + 2):
            try:
                await self._deliver(entry)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                metrics.JOBS_RETRIES.inc()
                log.exception(
                    "%s[%d] failed; delivering it again in %.1f s", entry.job, entry.index, backoff
                )
                try:  # If the store is down too, the count still grows; only the text is lost.
                    await self.jobs.record_error(entry, f"{type(exc).__name__}: {exc}")
                except Exception as record_exc:
                    log.warning("could not record the error: %s", record_exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
        # Held here it would never finish (a live worker's entries are never taken): put
        # it back on the queue for another worker.
        log.error("%s[%d] keeps failing here; giving it back", entry.job, entry.index)
        with contextlib.suppress(StoreUnavailable):
            await self.jobs.release(entry, config.name)

    async def _deliver(self, entry: Entry) -> None:
        config = self.config
        begin = await until_ok(lambda: self.jobs.begin(entry, config.name, config.max_deliveries))
        if begin.kind in ("done", "gone"):
            await until_ok(lambda: self.jobs.ack(entry))
            return
        options, tenant = await self._info(entry.job)
        if begin.kind == "cancelled":
            group = await group_of(self.jobs, entry, options)
            if group is None:
                await until_ok(lambda: self.jobs.finish(entry, CANCELLED, "cancelled"))
            else:  # its members were marked running with it: they are cancelled with it
                cancelled: list[GroupWrite] = [(i, CANCELLED, "cancelled") for i in group]
                await until_ok(lambda: self.jobs.finish_group(entry, cancelled))
            return
        if begin.kind == "dead":
            await self._dead_letter(entry, options, tenant, begin.attempts, begin.last_error)
            return
        payload = json.loads(begin.payload or "{}")
        if GROUP_KEY in payload:
            await self._deliver_group(entry, payload[GROUP_KEY], options, tenant)
            return
        rollout = Rollout.model_validate(payload["rollout"])
        result, _ = await self.engine.for_tenant(tenant).judge_or_fail(
            rollout,
            options,
            _advantage(payload.get("advantage")),
            field=f"rollouts[{entry.index}]",
        )
        self.judged += 1
        kind: FinishKind = "failed" if result.status == "failed" else "done"
        data = dump_json_str(result)
        await until_ok(lambda: self.jobs.finish(entry, data, kind))

    async def _deliver_group(
        self, entry: Entry, indices: list[int], options: Options, tenant: str
    ) -> None:
        engine = self.engine.for_tenant(tenant)
        self.judged += await deliver_group(
            self.jobs, engine, self.config.name, entry, indices, options
        )

    async def _dead_letter(
        self, entry: Entry, options: Options, tenant: str, attempts: int, last_error: str | None
    ) -> None:
        group = await group_of(self.jobs, entry, options)
        lost: list[GroupWrite] = []
        for index in group or [entry.index]:  # a leader: its group dies with it
            ids = await until_ok(functools.partial(self.jobs.ids, entry.job, index, index + 1))
            result = dead_letter_result(ids[0] if ids else f"#{index}", attempts, last_error)
            lost.append((index, dump_json_str(result), "dead"))
        record = dead_letter_record(entry, tenant, attempts, last_error, time.time(), group)
        log.error("%s[%d] dead-lettered: %s", entry.job, entry.index, result.error)
        written = await until_ok(
            lambda: (
                self.jobs.finish_group(entry, lost, dead_record=record)
                if group
                else self.jobs.finish(entry, dump_json_str(result), "dead", record)
            )
        )
        if written:
            metrics.JOBS_DEAD_LETTERED.inc()

    async def _info(self, job_id: str) -> tuple[Options, str]:
        if job_id not in self._job_info:
            record = await until_ok(lambda: self.jobs.get(job_id))
            if record is None:
                raise LookupError(f"job {job_id} vanished")
            if len(self._job_info) >= 1024:
                self._job_info.clear()
            self._job_info[job_id] = (Options.model_validate_json(record.options), record.tenant)
        return self._job_info[job_id]


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


def _advantage(stored: object) -> GroupAdvantage | None:
    """The payload's advantage; a bare number is a payload queued by an older version."""
    if isinstance(stored, dict):
        return GroupAdvantage(float(stored["value"]), float(stored["group_scale"]))
    if isinstance(stored, int | float):
        return GroupAdvantage(float(stored), abs(float(stored)))
    return None
