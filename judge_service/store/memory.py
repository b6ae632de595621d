"""The in-process store: a byte-bounded LRU of judgments and local token buckets."""

from __future__ import annotations

from collections import OrderedDict

from judge_service.buckets import LocalBuckets
from judge_service.store.base import Store


class MemoryStore(Store):
    kind = "memory"

    def __init__(self, max_bytes: int = 256 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._judgments: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._bytes = 0
        self._buckets = LocalBuckets()

    async def ping(self) -> None:
        return None

    async def get_judgment(self, tenant: str, key: str) -> str | None:
        data = self._judgments.get((tenant, key))
        if data is not None:
            self._judgments.move_to_end((tenant, key))
        return data

    async def put_judgment(
        self, tenant: str, key: str, data: str, *, replace: bool = False
    ) -> bool:
        if (tenant, key) in self._judgments:
            if not replace:
                return False
            self._bytes -= len(self._judgments.pop((tenant, key)))
        self._judgments[(tenant, key)] = data
        self._bytes += len(data)
        # Evict the least recently used until the cache fits again (the newest always stays).
        while self._bytes > self.max_bytes and len(self._judgments) > 1:
            _, old = self._judgments.popitem(last=False)
            self._bytes -= len(old)
        return True

    async def take_tokens(self, bucket: str, rate_per_s: float, capacity: float) -> float:
        return self._buckets.take_now(bucket, [("requests", rate_per_s, capacity, 1.0)])
