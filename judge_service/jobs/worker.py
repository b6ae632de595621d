"""A worker: takes rollouts off the job queue, judges them, writes each result once.

The loop keeps at most `concurrency` rollouts in flight and asks the queue for
exactly as many as it has free slots, so an entry is never waiting inside a
worker while its idle clock runs (the reclaim time must only ever cover
judging). Every few seconds it first takes over entries that a dead worker left
idle for longer than the reclaim time.

Store failures never lose work: each store step of a rollout is retried until
Redis answers again (an outage pauses the worker; its results wait in memory),
and any other failure is recorded as the rollout's last error and the entry left
unacknowledged, so it is delivered again, until the delivery limit sends it to
the dead-letter list with that error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from judge_service.credit import GroupAdvantage
from judge_service.jobs.model import (
    CANCELLED,
    Entry,
    FinishKind,
    JobStore,
    dead_letter_record,
    dead_letter_result,
)
from judge_service.pipeline import Engine
from judge_service.schemas import Options, Rollout
from judge_service.store import StoreUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class WorkerConfig:
    name: str
    concurrency: int
    reclaim_idle_s: float
    max_deliveries: int
    reclaim_every_s: float = 5.0
    heartbeat_s: float = 5.0
    external: bool = True  # a separate process: heartbeats so `serve` can step aside
    yield_to_external: bool = False  # the in-process worker of `serve` in auto mode
    drain_s: float = 30.0  # on stop, how long in-flight rollouts may still finish
    block_s: float = 1.0  # an idle worker waits this long for new entries (and for a stop)


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

    async def run(self, stop: asyncio.Event) -> None:
        """Work until `stop` is set; then let in-flight rollouts finish (up to drain_s)."""
        config = self.config
        next_reclaim = next_beat = 0.0
        backoff = 0.1
        try:
            await self._until_ok(self.jobs.ensure_queue, stop)
            while not stop.is_set():
                try:
                    now = time.monotonic()
                    if config.external and now >= next_beat:
                        await self.jobs.heartbeat(config.name)
                        next_beat = now + config.heartbeat_s
                    if config.yield_to_external and await self._externals_alive(now):
                        await _wait(stop, config.heartbeat_s)
                        continue
                    free = config.concurrency - len(self.in_flight)
                    if free <= 0:
                        await asyncio.wait(
                            set(self.in_flight), timeout=1.0, return_when=asyncio.FIRST_COMPLETED
                        )
                        continue
                    entries = []
                    if now >= next_reclaim:
                        entries = await self.jobs.reclaim(config.name, config.reclaim_idle_s, free)
                        next_reclaim = now + config.reclaim_every_s
                        for entry in entries:
                            log.info(
                                "took over %s[%d] (entry %s)", entry.job, entry.index, entry.id
                            )
                    if len(entries) < free:
                        entries += await self.jobs.claim(
                            config.name, free - len(entries), block_s=config.block_s
                        )
                    for entry in entries:
                        task = asyncio.create_task(self._process(entry))
                        self.in_flight[task] = entry
                        task.add_done_callback(self._forget)
                    backoff = 0.1
                except StoreUnavailable as exc:
                    log.warning("worker %s: %s; retrying in %.1f s", config.name, exc, backoff)
                    await _wait(stop, backoff)
                    backoff = min(backoff * 2, 5.0)
        finally:
            await self._drain()
            self.stopped.set()

    def _forget(self, task: asyncio.Task[None]) -> None:
        self.in_flight.pop(task, None)

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
                await self.jobs.release(entry)
            except StoreUnavailable:
                log.warning(
                    "could not release %s[%d]; it will be reclaimed", entry.job, entry.index
                )

    async def _externals_alive(self, now: float) -> bool:
        checked_at, alive = self._externals
        if now - checked_at >= self.config.heartbeat_s:
            alive = bool(await self.jobs.live_workers(3 * self.config.heartbeat_s))
            self._externals = (now, alive)
        return alive

    async def _until_ok(
        self, step: Callable[[], Awaitable[T]], stop: asyncio.Event | None = None
    ) -> T:
        """Run a store step, retrying while the store is unavailable."""
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

    async def _process(self, entry: Entry) -> None:
        config = self.config
        try:
            begin = await self._until_ok(
                lambda: self.jobs.begin(entry, config.name, config.max_deliveries)
            )
            if begin.kind in ("done", "gone"):
                await self._until_ok(lambda: self.jobs.ack(entry))
                return
            if begin.kind == "cancelled":
                await self._until_ok(lambda: self.jobs.finish(entry, CANCELLED, "cancelled"))
                return
            options, tenant = await self._info(entry.job)
            if begin.kind == "dead":
                await self._dead_letter(entry, tenant, begin.attempts, begin.last_error)
                return
            payload = json.loads(begin.payload or "{}")
            rollout = Rollout.model_validate(payload["rollout"])
            result, _ = await self.engine.for_tenant(tenant).judge_or_fail(
                rollout,
                options,
                _advantage(payload.get("advantage")),
                field=f"rollouts[{entry.index}]",
            )
            self.judged += 1
            kind: FinishKind = "failed" if result.status == "failed" else "done"
            data = result.model_dump_json(exclude_none=True)
            await self._until_ok(lambda: self.jobs.finish(entry, data, kind))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("%s[%d] failed; it will be delivered again", entry.job, entry.index)
            # If the store is down too, the delivery count still grows; only the text is lost.
            with contextlib.suppress(StoreUnavailable):
                await self.jobs.record_error(entry, f"{type(exc).__name__}: {exc}")

    async def _dead_letter(
        self, entry: Entry, tenant: str, attempts: int, last_error: str | None
    ) -> None:
        ids = await self._until_ok(lambda: self.jobs.ids(entry.job, entry.index, entry.index + 1))
        result = dead_letter_result(ids[0] if ids else f"#{entry.index}", attempts, last_error)
        record = dead_letter_record(entry, tenant, attempts, last_error, time.time())
        log.error("%s[%d] dead-lettered: %s", entry.job, entry.index, result.error)
        data = result.model_dump_json(exclude_none=True)
        await self._until_ok(lambda: self.jobs.finish(entry, data, "dead", record))

    async def _info(self, job_id: str) -> tuple[Options, str]:
        if job_id not in self._job_info:
            record = await self._until_ok(lambda: self.jobs.get(job_id))
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
