"""The worker inside ``judge-service serve``, so one process can do everything.

Without Redis it is the only thing that can reach the in-process queue, so it
always runs (unless turned off). With Redis, in ``auto`` mode it runs too but
claims nothing while a separate worker (``judge-service worker``) has a fresh
heartbeat: a deployment with workers keeps judging off the API processes,
and a lone ``serve`` still finishes its jobs.

It judges with slots of its own (`Engine.with_slots`), not the API's: a rollout it
claimed never waits behind synchronous requests, and synchronous requests never
wait behind a job's rollouts.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket

from judge_service.config import Settings
from judge_service.jobs.model import JobStore
from judge_service.jobs.worker import Worker, WorkerConfig
from judge_service.pipeline import Engine

log = logging.getLogger(__name__)


class InProcessWorker:
    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self.worker.run(self._stop))

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, self.worker.config.drain_s + 10)
            except TimeoutError:
                self._task.cancel()
            except Exception:
                log.exception("in-process worker failed")


def start_inprocess_worker(
    settings: Settings, engine: Engine, jobs: JobStore
) -> InProcessWorker | None:
    if settings.inprocess_worker == "off":
        if not jobs.shared:
            log.warning("JUDGE_INPROCESS_WORKER=off without Redis: jobs will never be judged")
        return None
    config = WorkerConfig(
        name=f"serve-{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}",
        concurrency=settings.worker_concurrency or settings.max_concurrency,
        reclaim_idle_s=settings.jobs_reclaim_idle_s,
        max_deliveries=settings.jobs_max_deliveries,
        dead_after_s=settings.jobs_dead_after_s,
        external=False,
        yield_to_external=jobs.shared and settings.inprocess_worker == "auto",
        drain_s=5.0,  # a stopping API returns its rollouts to the queue quickly
        block_s=0.25,  # and stops quickly when idle
    )
    worker = InProcessWorker(Worker(engine.with_slots(config.concurrency), jobs, config))
    worker.start()
    return worker
