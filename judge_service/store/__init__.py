"""Where judged results and job state live: in this process, or in a shared Redis."""

from __future__ import annotations

from typing import TYPE_CHECKING

from judge_service.errors import StoreUnavailable
from judge_service.store.base import Store

if TYPE_CHECKING:  # config reads store.redis_url to check JUDGE_REDIS_URL at startup
    from judge_service.config import Settings

__all__ = ["Store", "StoreUnavailable", "open_store"]


def open_store(settings: Settings) -> Store:
    """Redis when ``JUDGE_REDIS_URL`` is set, else the in-process store. Connects lazily."""
    if settings.redis_url:
        from judge_service.store.redis_store import RedisStore

        return RedisStore(
            settings.redis_url,
            prefix=settings.redis_prefix,
            cache_ttl_s=settings.cache_ttl_s,
            timeout_s=settings.redis_timeout_s,
        )
    from judge_service.store.memory import MemoryStore

    return MemoryStore(max_bytes=settings.memory_cache_mb * 1024 * 1024)
