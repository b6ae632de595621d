"""Client-side rate limiting per provider and model: rpm and tpm buckets, server-directed pauses.

Retries themselves belong to the SDKs (configured once, see `provider.py`).
This limiter only spaces out *new* requests: it holds each caller until the
request and token buckets allow it and until any pause a server asked for
(``retry-after`` on a 429/503/529, or a rate-limit header saying nothing is
left before a reset) has passed, so one rollout's 429 slows every rollout on
that provider and model instead of each finding out by itself. A caller whose
deadline comes before its turn fails at once with `RateLimitedError`.

It uses no asyncio locks (each check-and-take runs between awaits, so it is
atomic on one event loop), which also lets one limiter serve several loops.

With Redis configured (`set_shared_backend`, called by ``serve`` and
``worker``), limiters that have an rpm or tpm quota keep their buckets and
pauses in Redis instead, one atomic script per check-and-take, so any number of
API replicas and workers together respect one provider quota. If Redis stops
answering, each process falls back to its own buckets until it is back.

A limiter may also cap the requests in flight (``concurrency`` in
JUDGE_LLM_RATE_LIMITS), so a server with one decoding slot is sent one request
at a time instead of a queue it serves while callers' deadlines run out. That
cap is per process: replicas each hold their own count.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import hashlib
import logging
import math
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from datetime import datetime
from typing import Any

from judge_service.buckets import Buckets, Demand, LocalBuckets, Quota
from judge_service.errors import RateLimitedError, SlotTimeoutError

log = logging.getLogger(__name__)

PAUSE_STATUSES = frozenset({429, 503, 529})


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """``retry-after-ms``, else ``retry-after`` as seconds or an HTTP date; None if absent."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        parsed = email.utils.parsedate_tz(raw)
        return None if parsed is None else max(0.0, email.utils.mktime_tz(parsed) - time.time())


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _reset_seconds(value: str) -> float | None:
    """OpenAI-style durations (``6m0s``, ``20ms``) or Anthropic RFC 3339 reset times."""
    parts = _DURATION.findall(value)
    if parts and "".join(n + u for n, u in parts) == value.strip():
        return sum(float(n) * _UNIT[u] for n, u in parts)
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, moment.timestamp() - time.time())


class Slots:
    """At most `size` holders at once, first come first served; the rest wait.

    Process-local by design (a request in flight is this process's to count). Not an
    asyncio.Semaphore: a limiter is shared by judges on different event loops, so each
    waiter is woken on its own loop, and the count is guarded by a thread lock.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.busy = 0
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()
        self._lock = threading.Lock()

    async def acquire(self, timeout: float) -> bool:
        """Take a slot; False when none came free within `timeout` seconds."""
        with self._lock:
            if self.busy < self.size and not self._waiters:
                self.busy += 1
                return True
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, waiter))
        try:
            async with asyncio.timeout(max(0.0, timeout)):
                await asyncio.shield(waiter)
            return True
        except BaseException as exc:
            with self._lock:
                try:
                    self._waiters.remove((loop, waiter))
                    granted = False
                except ValueError:  # a release already handed this waiter the slot
                    granted = waiter.done() and not waiter.cancelled()
                waiter.cancel()  # a grant still on its way passes the slot on (_grant)
            if granted:
                self.release()
            if isinstance(exc, TimeoutError):
                return False
            raise

    def release(self) -> None:
        with self._lock:
            while self._waiters:
                loop, waiter = self._waiters.popleft()
                try:
                    loop.call_soon_threadsafe(self._grant, waiter)
                    return  # the slot passes to that waiter: `busy` is unchanged
                except RuntimeError:  # its loop is closed
                    continue
            self.busy -= 1

    def _grant(self, waiter: asyncio.Future[None]) -> None:
        if waiter.done():  # it gave up meanwhile: the next one gets the slot
            self.release()
        else:
            waiter.set_result(None)


class RateLimiter:
    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        shared: Buckets | None = None,
        name: str = "",
        concurrency: int | None = None,
    ) -> None:
        self._clock = clock
        self._requests = Quota.per_minute(rpm) if rpm else None
        self._tokens = Quota.per_minute(tpm) if tpm else None
        # This process's buckets and pause: all of them without `shared`, else its own
        # pause and the fallback while `shared` is away.
        self._local = LocalBuckets(clock)
        self.shared = shared
        self.name = name
        self._background: set[asyncio.Task[None]] = set()
        self._warned = False
        self.slots = Slots(concurrency) if concurrency else None

    @contextlib.asynccontextmanager
    async def slot(self, deadline: float | None, who: str = "the provider") -> AsyncIterator[None]:
        """Hold one of the `concurrency` request slots for the body; without a cap, no-op."""
        if self.slots is None:
            yield
            return
        wait = float("inf") if deadline is None else deadline - self._clock()
        if not await self.slots.acquire(min(wait, 86_400.0)):
            raise SlotTimeoutError(
                f"no request slot for {who} came free before this rollout's deadline "
                f"(JUDGE_LLM_RATE_LIMITS concurrency {self.slots.size}, all in flight)"
            )
        try:
            yield
        finally:
            self.slots.release()

    @property
    def resume_at(self) -> float:
        """No new request before this time (clock units) in this process."""
        return self._local.resume_at(self.name)

    def pause(self, seconds: float) -> None:
        self._local.pause_now(self.name, seconds)
        if self.shared is not None:
            self._in_background(self.shared.pause(self.name, seconds))

    def _in_background(self, step: Coroutine[Any, Any, None]) -> None:
        """Tell the shared buckets without making the (synchronous) caller wait."""
        try:
            task = asyncio.get_running_loop().create_task(self._quietly(step))
        except RuntimeError:
            step.close()
            return
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _quietly(self, step: Coroutine[Any, Any, None]) -> None:
        try:
            await step
        except Exception as exc:
            self._shared_failed(exc)

    def _shared_failed(self, exc: Exception) -> None:
        if not self._warned:
            log.warning("shared rate limit unavailable, using this process's buckets: %s", exc)
            self._warned = True

    def _demands(self, tokens: int) -> list[Demand]:
        demands = []
        if self._requests is not None:
            demands.append(self._requests.demand("rpm", 1.0))
        if self._tokens is not None:
            demands.append(self._tokens.demand("tpm", float(tokens)))
        return demands

    async def acquire(self, tokens: int, deadline: float | None = None) -> None:
        """Wait for room for one request of about `tokens` tokens, or fail if past `deadline`."""
        if self.shared is not None:
            try:
                await self._acquire_shared(tokens, deadline)
                return
            except RateLimitedError:
                raise
            except Exception as exc:  # Redis away: this process's own buckets meanwhile
                self._shared_failed(exc)
        while (wait := self._local.take_now(self.name, self._demands(tokens))) > 0:
            if deadline is not None and self._clock() + wait > deadline:
                raise RateLimitedError(
                    f"rate limited: the next request slot is {wait:.1f} s away, "
                    "after this rollout's deadline"
                )
            await asyncio.sleep(wait)

    async def _acquire_shared(self, tokens: int, deadline: float | None) -> None:
        assert self.shared is not None
        while True:
            wait = max(0.0, self.resume_at - self._clock())  # this process's own pause first
            if wait == 0:
                wait = await self.shared.take(self.name, self._demands(tokens))
                if wait == 0:
                    self._warned = False
                    return
            if deadline is not None and self._clock() + wait > deadline:
                raise RateLimitedError(
                    f"rate limited: the next request slot is {wait:.1f} s away, "
                    "after this rollout's deadline"
                )
            await asyncio.sleep(wait)

    def settle(self, extra_tokens: int) -> None:
        """Correct the token bucket once the real usage is known (may go negative)."""
        quota = self._tokens
        if quota is not None:
            self._local.adjust_now(self.name, "tpm", quota.rate, quota.capacity, extra_tokens)
            if self.shared is not None and extra_tokens:
                self._in_background(
                    self.shared.adjust(self.name, "tpm", quota.rate, quota.capacity, extra_tokens)
                )

    def observe(self, status: int, headers: Mapping[str, str]) -> None:
        """Learn from a response: ``retry-after`` on overload, exhausted rate-limit headers."""
        if status in PAUSE_STATUSES:
            wait = retry_after_seconds(headers)
            if wait is not None:
                self.pause(wait)
        for remaining, reset in (
            ("anthropic-ratelimit-requests-remaining", "anthropic-ratelimit-requests-reset"),
            ("x-ratelimit-remaining-requests", "x-ratelimit-reset-requests"),
        ):
            if headers.get(remaining, "").strip() == "0" and reset in headers:
                seconds = _reset_seconds(headers[reset])
                if seconds is not None and math.isfinite(seconds):
                    self.pause(min(seconds, 600.0))


# One limiter per provider, model and endpoint in this process, shared by every Engine.
_SHARED: OrderedDict[tuple[str, str, float | None, float | None, int | None], RateLimiter] = (
    OrderedDict()
)
_MAX_SHARED = 256
_BACKEND: Buckets | None = None


def set_shared_backend(backend: Buckets | None) -> None:
    """Keep quotas in `backend` (Redis) from now on, or in this process again (None)."""
    global _BACKEND
    _BACKEND = backend
    _SHARED.clear()  # limiters built from here on pick the new backend


def shared_limiter(
    quota: str,
    base_url: str,
    rpm: float | None,
    tpm: float | None,
    concurrency: int | None = None,
) -> RateLimiter:
    """The limiter of one quota (a key of JUDGE_LLM_RATE_LIMITS, or a judge spec without
    one) at one endpoint, shared by every judge it applies to: its buckets and, when
    `concurrency` is set, its request slots."""
    key = (quota, base_url, rpm, tpm, concurrency)
    limiter = _SHARED.get(key)
    if limiter is None:
        # Only a limiter with a quota goes to Redis: without one there is nothing to share
        # but pauses, not worth a round trip per request.
        shared = _BACKEND if (rpm or tpm) else None
        endpoint = hashlib.sha256(base_url.encode()).hexdigest()[:12]
        limiter = RateLimiter(
            rpm, tpm, shared=shared, name=f"{quota}:{endpoint}", concurrency=concurrency
        )
        _SHARED[key] = limiter
        while len(_SHARED) > _MAX_SHARED:  # keys follow configured judges: keep it bounded
            _SHARED.popitem(last=False)
    else:
        _SHARED.move_to_end(key)
    return limiter


def reset_shared_limiters() -> None:
    """Forget every shared limiter (tests; a config reload)."""
    _SHARED.clear()
