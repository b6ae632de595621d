"""Durable asynchronous jobs: a queue of rollouts, workers that judge them, their results."""

from __future__ import annotations

from judge_service.config import Settings
from judge_service.jobs.model import JobStore
from judge_service.store import Store

__all__ = ["JobStore", "open_job_store"]


def open_job_store(settings: Settings, store: Store) -> JobStore:
    """The Redis Streams queue beside a Redis store (one connection pool), else in-process."""
    from judge_service.store.redis_store import RedisStore

    if isinstance(store, RedisStore):
        from judge_service.jobs.queue import RedisJobStore

        return RedisJobStore(
            store.conn,
            ttl_s=settings.job_ttl_s,
            wait_replicas=settings.redis_wait_replicas,
            wait_timeout_ms=settings.redis_wait_timeout_ms,
        )
    from judge_service.jobs.memory_queue import MemoryJobStore

    return MemoryJobStore(ttl_s=settings.job_ttl_s)
