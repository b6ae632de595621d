"""What the service keeps: judged results by cache key, and token buckets.

Two implementations share this interface: `MemoryStore` (one process, the
default when ``JUDGE_REDIS_URL`` is unset) and `RedisStore` (any number of API
processes and workers sharing one Redis). Values are JSON strings: the store
never interprets a result, so both implementations stay small and alike.

Every judgment lives under its tenant (the API key that asked for it) so that a
key never sees, nor learns the existence of, another key's judgments. Writes are
first-write-wins: a second judgment of the same content never replaces the one
already returned to a caller.
"""

from __future__ import annotations

from abc import ABC, abstractmethod


class Store(ABC):
    kind: str  # "memory" | "redis"

    @abstractmethod
    async def ping(self) -> None:
        """Raise StoreUnavailable unless the store answers now."""

    @abstractmethod
    async def get_judgment(self, tenant: str, key: str) -> str | None:
        """The stored judgment (JSON) under `key` for `tenant`, or None."""

    @abstractmethod
    async def put_judgment(
        self, tenant: str, key: str, data: str, *, replace: bool = False
    ) -> bool:
        """Store a judgment unless one is already there (or `replace`: in any case); True if
        this call wrote it."""

    @abstractmethod
    async def take_tokens(self, bucket: str, rate_per_s: float, capacity: float) -> float:
        """Take one token from `bucket`; 0 when taken, else the seconds until one is there."""

    async def close(self) -> None:  # noqa: B027 - optional: nothing to release in-process
        """Release connections."""
