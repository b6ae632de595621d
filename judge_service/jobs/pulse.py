"""A worker's background duties, beside judging: its heartbeat, and the queue's gauges.

The heartbeat runs as its own task, never behind the worker's loop (which may wait a
second on an empty queue or on full slots): a live worker must never look dead, or
its rollouts would be judged twice. Sampling the queue for the metrics, and
finishing job creations that died half way, run in a second task, so a slow Redis
read there never delays a heartbeat either.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from prometheus_client import Gauge

from judge_service import metrics
from judge_service.errors import StoreUnavailable
from judge_service.jobs.liveness import LIVENESS
from judge_service.jobs.model import JobStore, QueueStats
from judge_service.store.redis_conn import GROUP

log = logging.getLogger(__name__)

STALLED_CREATION_S = 30.0  # a job creation this old and still queueing has lost its process


class Pulse:
    def __init__(
        self,
        jobs: JobStore,
        name: str,
        *,
        external: bool,
        heartbeat_s: float,
        sample_every_s: float,
    ) -> None:
        self.jobs = jobs
        self.name = name
        self.external = external
        self.heartbeat_s = heartbeat_s
        self.sample_every_s = sample_every_s
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.beat_failed_at = float("-inf")  # monotonic time of the last heartbeat that failed

    async def beat(self) -> None:
        await self.jobs.heartbeat(self.name, external=self.external)
        LIVENESS.beat()  # what the worker's /healthz answers from

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._every(self.heartbeat_s, self.beat)),
            asyncio.create_task(self._every(self.sample_every_s, self.sample)),
        ]

    async def stop(self) -> None:
        self._stop.set()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5.0)
        for task in self._tasks:
            task.cancel()

    async def sample(self) -> None:
        observe(await self.jobs.snapshot())
        resumed = await self.jobs.resume_creations(STALLED_CREATION_S)
        if resumed:
            log.warning("finished queueing %d job(s) whose creation stopped half way", resumed)

    async def _every(self, seconds: float, step: Callable[[], Awaitable[None]]) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                await step()
            except StoreUnavailable as exc:  # the worker's loop reports the outage
                log.debug("%s: %s", step.__name__, exc)
                if step == self.beat:
                    self.beat_failed_at = time.monotonic()
            except Exception:  # never let the heartbeat task die while the worker lives
                log.exception("worker %s: %s failed", self.name, step.__name__)
            wait = max(0.0, seconds - (time.monotonic() - began))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), wait)


def observe(stats: QueueStats) -> None:
    """Set the queue gauges; consumers gone since the last look lose their series."""
    metrics.JOBS_QUEUED.set(stats.queued)
    metrics.JOBS_GROUP_LAG.labels(GROUP).set(stats.queued)
    metrics.JOBS_GROUP_PENDING.labels(GROUP).set(sum(stats.pending.values()))
    metrics.JOBS_OLDEST_PENDING_AGE.set(stats.oldest_pending_age_s)
    metrics.JOBS_OLDEST_QUEUED_AGE.set(stats.oldest_queued_age_s)
    metrics.JOBS_DEAD_LETTERS.set(stats.dead_letters)
    for status, count in stats.jobs.items():
        metrics.JOBS.labels(status).set(count)
    _set_all(metrics.JOBS_PENDING, stats.pending)
    _set_all(metrics.JOBS_HEARTBEAT_AGE, stats.heartbeat_age_s)


_shown: dict[int, set[str]] = {}  # id(gauge) -> label values set at the last look


def _set_all(gauge: Gauge, values: dict[str, int] | dict[str, float]) -> None:
    for name, value in values.items():
        gauge.labels(name).set(value)
    # Remove only the gone ones (not clear()): a scrape in between sees no hole.
    key = id(gauge)  # the gauges are module globals: their ids never change
    for name in _shown.get(key, set()) - set(values):
        with contextlib.suppress(KeyError):
            gauge.remove(name)
    _shown[key] = set(values)
