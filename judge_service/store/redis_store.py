"""The Redis store: judgments shared by every API process and worker on one Redis."""

from __future__ import annotations

from judge_service.buckets import RedisBuckets
from judge_service.store.base import Store
from judge_service.store.redis_conn import RedisConnection


class RedisStore(Store):
    kind = "redis"

    def __init__(self, url: str, *, prefix: str, cache_ttl_s: int, timeout_s: float = 2.0) -> None:
        self.conn = RedisConnection(url, prefix, timeout_s)
        self.cache_ttl_s = cache_ttl_s
        self.buckets = RedisBuckets(self.conn)

    async def ping(self) -> None:
        await self.conn.ping()

    async def get_judgment(self, tenant: str, key: str) -> str | None:
        name = self.conn.keys.judgment(tenant, key)
        value: str | None = await self.conn.run(lambda r: r.get(name))
        return value

    async def put_judgment(
        self, tenant: str, key: str, data: str, *, replace: bool = False
    ) -> bool:
        name = self.conn.keys.judgment(tenant, key)
        written = await self.conn.run(
            lambda r: r.set(name, data, nx=not replace, ex=self.cache_ttl_s)
        )
        return bool(written)

    async def take_tokens(self, bucket: str, rate_per_s: float, capacity: float) -> float:
        return await self.buckets.take(bucket, [("requests", rate_per_s, capacity, 1.0)])

    async def close(self) -> None:
        await self.conn.close()
