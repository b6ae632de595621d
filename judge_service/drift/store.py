"""Where the drift state lives: in this process, or in the Redis every worker shares.

In Redis (``P`` is ``JUDGE_REDIS_PREFIX``)::

    P:drift:series               set     the series (tenant|judge|prompt version) seen
    P:drift:{series}:chunks      list    tallies (JSON) as processes wrote them, newest
                                         last, trimmed to what the window needs
    P:drift:{series}:baseline    string  the frozen baseline tally (SET NX: the first
                                         writer's stands, whoever restarts; a pin
                                         replaces it)
    P:drift:{series}:points      list    the verdict and scores after each chunk (the page)
    P:drift:canary:{judge}       list    canary runs (JSON), newest last
    P:drift:claim:{name}         string  SET NX EX: one process runs a canary per period
    P:drift:count:{judge}        string  judgments counted, for JUDGE_DRIFT_CANARY_EVERY

So the window survives a restart of any process, and a canary period is claimed once
among all of them.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from typing import Any

from judge_service.store import Store
from judge_service.store.redis_conn import RedisConnection


class DriftStore(ABC):
    @abstractmethod
    async def push(self, series: str, part: str, record: dict[str, Any], keep: int) -> None:
        """Append `record` to the series' list `part` (chunks, points), keeping the newest
        `keep`; and remember the series."""

    @abstractmethod
    async def read(self, series: str, part: str) -> list[dict[str, Any]]:
        """The list `part` of `series`, oldest first."""

    @abstractmethod
    async def baseline(self, series: str) -> dict[str, Any] | None: ...

    @abstractmethod
    async def set_baseline(
        self, series: str, record: dict[str, Any], *, replace: bool = False
    ) -> bool:
        """Freeze the baseline unless one is there (`replace`: pin it whatever is there);
        True if this call wrote it."""

    @abstractmethod
    async def series(self) -> list[str]: ...

    @abstractmethod
    async def claim(self, name: str, ttl_s: float) -> bool:
        """True for the one caller that claims `name` until it expires."""

    @abstractmethod
    async def add_count(self, name: str, amount: int) -> int:
        """Add to a shared counter; its value after."""


class MemoryDriftStore(DriftStore):
    def __init__(self) -> None:
        self._lists: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._baselines: dict[str, dict[str, Any]] = {}
        self._claims: dict[str, float] = {}
        self._counts: dict[str, int] = {}

    async def push(self, series: str, part: str, record: dict[str, Any], keep: int) -> None:
        items = self._lists.setdefault((series, part), [])
        items.append(record)
        del items[: max(0, len(items) - keep)]

    async def read(self, series: str, part: str) -> list[dict[str, Any]]:
        return list(self._lists.get((series, part), []))

    async def baseline(self, series: str) -> dict[str, Any] | None:
        return self._baselines.get(series)

    async def set_baseline(
        self, series: str, record: dict[str, Any], *, replace: bool = False
    ) -> bool:
        if series in self._baselines and not replace:
            return False
        self._baselines[series] = record
        return True

    async def series(self) -> list[str]:
        return sorted({s for s, part in self._lists if part == "chunks"})

    async def claim(self, name: str, ttl_s: float) -> bool:
        now = time.monotonic()
        if self._claims.get(name, 0.0) > now:
            return False
        self._claims[name] = now + ttl_s
        return True

    async def add_count(self, name: str, amount: int) -> int:
        self._counts[name] = self._counts.get(name, 0) + amount
        return self._counts[name]


class RedisDriftStore(DriftStore):
    def __init__(self, conn: RedisConnection) -> None:
        self.conn = conn
        self.prefix = f"{conn.keys.prefix}:drift"

    def _key(self, series: str, part: str) -> str:
        return f"{self.prefix}:{series}:{part}"

    async def push(self, series: str, part: str, record: dict[str, Any], keep: int) -> None:
        key, data = self._key(series, part), json.dumps(record)

        async def op(r: Any) -> None:
            async with r.pipeline(transaction=True) as pipe:
                pipe.rpush(key, data)
                pipe.ltrim(key, -keep, -1)
                if part == "chunks":
                    pipe.sadd(f"{self.prefix}:series", series)
                await pipe.execute()

        await self.conn.run(op)

    async def read(self, series: str, part: str) -> list[dict[str, Any]]:
        key = self._key(series, part)
        items: list[str] = await self.conn.run(lambda r: r.lrange(key, 0, -1))
        return [json.loads(item) for item in items]

    async def baseline(self, series: str) -> dict[str, Any] | None:
        key = self._key(series, "baseline")
        data: str | None = await self.conn.run(lambda r: r.get(key))
        return None if data is None else dict(json.loads(data))

    async def set_baseline(
        self, series: str, record: dict[str, Any], *, replace: bool = False
    ) -> bool:
        key, data = self._key(series, "baseline"), json.dumps(record)
        return bool(await self.conn.run(lambda r: r.set(key, data, nx=not replace)))

    async def series(self) -> list[str]:
        names: set[str] = await self.conn.run(lambda r: r.smembers(f"{self.prefix}:series"))
        return sorted(names)

    async def claim(self, name: str, ttl_s: float) -> bool:
        key, ms = f"{self.prefix}:claim:{name}", max(1, int(ttl_s * 1000))
        return bool(await self.conn.run(lambda r: r.set(key, "1", nx=True, px=ms)))

    async def add_count(self, name: str, amount: int) -> int:
        key = f"{self.prefix}:count:{name}"
        return int(await self.conn.run(lambda r: r.incrby(key, amount)))


def open_drift_store(store: Store) -> DriftStore:
    """Beside the judgment store: in Redis when it is Redis."""
    from judge_service.store.redis_store import RedisStore

    if isinstance(store, RedisStore):
        return RedisDriftStore(store.conn)
    return MemoryDriftStore()
