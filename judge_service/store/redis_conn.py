"""One Redis connection pool per process, the key layout, and how failures surface.

Every Redis call goes through `RedisConnection.run`, which turns connection
failures into `StoreUnavailable` and then fails fast for a moment (a small
circuit breaker), so a Redis that vanished costs a synchronous request one
refused connection, not a timeout per lookup. Health probes skip the breaker,
so `/readyz` sees a returning Redis at once.

Key layout (``P`` is ``JUDGE_REDIS_PREFIX``, one per deployment or test)::

    P:judgment:{tenant}:{cache_key}   string  a judged result (JSON), SET NX, cache TTL
    P:job:{id}                        hash    tenant total status options fingerprint
                                              created_at finished_at done failed
                                              cancelled dead
    P:job:{id}:ids                    list    rollout ids in input order
    P:job:{id}:in                     hash    index -> {"rollout", "advantage"} (deleted
                                              when the job finishes)
    P:job:{id}:out                    hash    index -> result JSON, HSETNX: first write wins
    P:job:{id}:run                    hash    index -> consumer judging it now
    P:job:{id}:tries                  hash    index -> deliveries so far
    P:job:{id}:errors                 hash    index -> last error of a failed delivery
    P:idem:{tenant}:{sha256(key)}     string  "{job id} {request fingerprint}"
    P:queue                           stream  one entry per rollout {job, i};
                                              consumer group "judges"
    P:dead                            list    dead-letter records (JSON), newest last
    P:workers                         zset    external worker name -> last heartbeat (s)
    P:bucket:{name}                   hash    token bucket {level, stamp}
    P:pause:{name}                    string  no provider request before this time (s)
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from judge_service.errors import StoreUnavailable
from judge_service.store.redis_url import open_client

# redis-py loads when a connection is made (redis_url.py says why): the drift store and
# the job queues import this module whether or not the server has Redis.
if TYPE_CHECKING:
    import redis.asyncio as aioredis

BREAKER_S = 1.0  # after a failure, fail without trying for this long
GROUP = "judges"


@dataclass(frozen=True)
class Keys:
    prefix: str

    def judgment(self, tenant: str, key: str) -> str:
        return f"{self.prefix}:judgment:{tenant}:{key}"

    def job(self, job_id: str, part: str = "") -> str:
        return f"{self.prefix}:job:{job_id}" + (f":{part}" if part else "")

    def idempotency(self, tenant: str, key: str) -> str:
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        return f"{self.prefix}:idem:{tenant}:{digest}"

    @property
    def stream(self) -> str:
        return f"{self.prefix}:queue"

    @property
    def dead(self) -> str:
        return f"{self.prefix}:dead"

    @property
    def workers(self) -> str:
        return f"{self.prefix}:workers"

    def bucket(self, name: str) -> str:
        return f"{self.prefix}:bucket:{name}"

    def pause(self, name: str) -> str:
        return f"{self.prefix}:pause:{name}"


class RedisConnection:
    def __init__(self, url: str, prefix: str, timeout_s: float = 2.0) -> None:
        from redis import exceptions as redis_errors
        from redis.asyncio.retry import Retry
        from redis.backoff import ConstantBackoff

        self.url = url
        self.keys = Keys(prefix)
        self.client: aioredis.Redis
        self.client, self._sentinel = open_client(
            url,
            decode_responses=True,
            socket_timeout=timeout_s,
            socket_connect_timeout=min(timeout_s, 1.0),
            # One quick retry covers a pooled connection that a Redis restart closed;
            # more would only delay the fallback of a request that does not need Redis.
            retry=Retry(ConstantBackoff(0.05), 1),
            health_check_interval=30,
        )
        self.last_error: str | None = None
        self._down_until = 0.0
        # What counts as Redis being down (`run`), kept here: redis is imported by now.
        self._down_errors = (redis_errors.ConnectionError, redis_errors.TimeoutError, OSError)

    async def run(
        self, op: Callable[[aioredis.Redis], Awaitable[Any]], *, probe: bool = False
    ) -> Any:
        """`op(client)`, its connection failures as StoreUnavailable. Returns Any: replies are
        str (decode_responses), which the client's own annotations cannot express."""
        if not probe and time.monotonic() < self._down_until:
            raise StoreUnavailable(f"redis unavailable: {self.last_error}")
        try:
            result = await op(self.client)
        except self._down_errors as exc:
            self._down_until = time.monotonic() + BREAKER_S
            self.last_error = f"{type(exc).__name__}: {exc}"
            raise StoreUnavailable(f"redis unavailable: {self.last_error}") from exc
        self._down_until = 0.0
        return result

    async def ping(self) -> None:
        await self.run(lambda r: r.ping(), probe=True)

    async def close(self) -> None:
        await self.client.aclose()
        if self._sentinel is not None:
            await self._sentinel.aclose()
