"""Tokenizers by name, loaded once, at a bounded cost, and only those the server allows.

`TokenizerCache` keeps loaded tokenizers in an LRU. Concurrent requests for a name
share one load (single flight), which runs in its own thread: a caller waits at most
`load_timeout_s` and then gets a 503 while the load goes on. That clock starts once
transformers is imported: a server imports it in the background as it starts (seconds,
torch with it), and a request that comes meanwhile waits for that import, then for its
tokenizer's load, rather than failing for what it cannot help. A name that failed fails
fast, with the same error, for `failure_ttl_s`; all that is kept of it is that one entry
in a bounded LRU. What may be loaded, and how, is `loading.py`; decoding is
`detokenize.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from judge_service.errors import TokenizerError, UnavailableError
from judge_service.trace.detokenize import LoadedTokenizer
from judge_service.trace.loading import (
    HUB_TIMEOUT_S,
    Source,
    TokenizerPolicy,
    auto_tokenizer,
    check_name,
    imported,
    load_hf,
    shown,
    trusted_source,
)

if TYPE_CHECKING:
    from judge_service.config import Settings

__all__ = ["LoadedTokenizer", "TokenizerCache", "TokenizerPolicy"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Failure:
    """What a failed load left behind: the error to repeat until `until`, nothing more
    (no exception, traceback or lock that would keep the name's load alive)."""

    unavailable: bool  # the hub was unreachable (503), else the name is wrong (422)
    message: str
    until: float  # time.monotonic()


class _LoadFailed(Exception):
    def __init__(self, failure: _Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


@dataclass(frozen=True)
class _Load:
    """A load in flight, shared by every request for its name until it ends."""

    future: Future[LoadedTokenizer]
    timeout: float | None  # waiters give up this long after the clock starts; None: never
    hub: bool  # from the hub, not a local directory
    # The deadline (time.monotonic(); inf: none), set when transformers is imported.
    clock: Future[float] = field(default_factory=Future)

    def start_clock(self) -> None:
        if not self.clock.done():
            timeout = self.timeout
            self.clock.set_result(math.inf if timeout is None else time.monotonic() + timeout)


class TokenizerCache:
    """Tokenizers by name: loaded once (concurrent requests for a name share one load),
    kept in an LRU; a failed name fails fast for `failure_ttl_s`; nobody waits more than
    `load_timeout_s` for a load, which then finishes (or not) in its own thread.

    With no `policy` (and no `allowed`) every name is loaded: the command line, tests and
    the probe. A server builds its cache with `from_settings`.
    """

    def __init__(
        self,
        *,
        max_size: int = 8,
        allowed: Sequence[str] | None = None,
        policy: TokenizerPolicy | None = None,
        load_timeout_s: float | None = None,
        failure_ttl_s: float = 60.0,
        offline: bool = False,
        max_failures: int = 1024,
        max_loads: int = 4,
    ) -> None:
        if policy is None and allowed is not None:
            policy = TokenizerPolicy(allowed=allowed)
        self.policy = policy
        self._max_size = max_size
        self._load_timeout_s = load_timeout_s
        self._failure_ttl_s = failure_ttl_s
        self._offline = offline
        self._max_failures = max_failures
        # A hub load holds a thread until transformers returns, which against a hub that
        # dies mid-download can be minutes: at most this many at once, whatever names
        # callers invent. (A local load ends with the disk; names under the roots are few.)
        self._max_loads = max_loads
        self._items: OrderedDict[str, LoadedTokenizer] = OrderedDict()
        self._failures: OrderedDict[str, _Failure] = OrderedDict()
        self._loading: dict[str, _Load] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, *, trusted: bool = False) -> TokenizerCache:
        """The server's cache; `trusted` (a command run by the operator) loads any name and
        waits for a download however long it takes."""
        policy = None
        if not trusted:
            policy = TokenizerPolicy(
                allowed=settings.allowed_tokenizers or (),
                roots=settings.tokenizer_roots or (),
                default=settings.default_tokenizer,
            )
        return cls(
            max_size=settings.tokenizer_cache_size,
            policy=policy,
            load_timeout_s=None if trusted else settings.tokenizer_load_timeout_s,
            failure_ttl_s=settings.tokenizer_failure_ttl_s,
            offline=settings.tokenizer_offline,
        )

    def sizes(self) -> dict[str, int]:
        """How many names the cache holds state for: loaded, loading, failed."""
        with self._lock:
            return {
                "loaded": len(self._items),
                "loading": len(self._loading),
                "failed": len(self._failures),
            }

    def get(self, name: str, field: str = "tokenizer") -> LoadedTokenizer:
        """The tokenizer `name`; TokenizerError (422) or UnavailableError (503) naming `field`.
        Blocks the calling thread while a load is in flight (see `aget`)."""
        joined = self._join(name, field)
        if isinstance(joined, LoadedTokenizer):
            return joined
        try:
            return joined.future.result(timeout=_remaining(joined.clock.result()))
        except TimeoutError:
            raise self._still_loading(name, field) from None
        except _LoadFailed as exc:
            raise self._error(exc.failure, field) from None

    async def aget(self, name: str, field: str = "tokenizer") -> LoadedTokenizer:
        """`get` for the event loop: waiting for a load holds no thread of the loop's pool,
        so requests for a name the hub never serves cannot starve everyone else's."""
        joined = self._join(name, field)
        if isinstance(joined, LoadedTokenizer):
            return joined
        shared = asyncio.wrap_future(joined.future)
        # Read its outcome even when nobody awaits it any more (this caller timed out):
        # else asyncio logs "exception was never retrieved" for every failed load.
        shared.add_done_callback(_retrieve)
        deadline = await asyncio.wrap_future(joined.clock)
        try:
            return await asyncio.wait_for(asyncio.shield(shared), _remaining(deadline))
        except TimeoutError:
            raise self._still_loading(name, field) from None
        except _LoadFailed as exc:
            raise self._error(exc.failure, field) from None

    def _join(self, name: str, field: str) -> LoadedTokenizer | _Load:
        """The loaded tokenizer, or the load to wait for (started here if none is)."""
        if self.policy is None or self.policy.admits_by_name(name):
            # Such a name is admitted whatever is on disk, so a loaded one needs no stat of
            # its directory (two per request, BENCHMARKS.md "End to end"); a name under the
            # roots is resolved every time, so a directory removed since is refused.
            with self._lock:
                loaded = self._items.get(name)
                if loaded is not None:
                    self._items.move_to_end(name)
                    return loaded
        if self.policy is not None:
            source = self.policy.resolve(name, field)
        else:
            check_name(name, field)
            source = trusted_source(name)
        now = time.monotonic()
        with self._lock:
            if name in self._items:
                self._items.move_to_end(name)
                return self._items[name]
            failure = self._failures.get(name)
            if failure is not None:
                if failure.until > now:
                    raise self._error(failure, field)
                del self._failures[name]
            load = self._loading.get(name)
            if load is not None:
                return load
            hub_loads = sum(1 for other in self._loading.values() if other.hub)
            if not source.local and hub_loads >= self._max_loads:
                raise UnavailableError(
                    f"{hub_loads} tokenizers are loading from the hub already; try again shortly",
                    field=field,
                    retry_after_s=_RETRY_LOADING_S,
                )
            load = _Load(Future(), self._load_timeout_s, hub=not source.local)
            # Running: a waiter that gives up (its task cancelled) cannot cancel them.
            load.future.set_running_or_notify_cancel()
            load.clock.set_running_or_notify_cancel()
            if imported():
                load.start_clock()
            self._loading[name] = load
        thread = threading.Thread(
            target=self._load, args=(name, source, load), name="tokenizer-load", daemon=True
        )
        thread.start()
        return load

    def _load(self, name: str, source: Source, load: _Load) -> None:
        """In the load's own thread: load, then record the tokenizer or the failure."""
        hub_timeout = min(HUB_TIMEOUT_S, self._load_timeout_s or HUB_TIMEOUT_S)
        loaded: LoadedTokenizer | None = None
        failure: _Failure | None = None
        # The one import of transformers, waited for if under way; if it fails, load_hf
        # tries it again below and this load reports what failed.
        with contextlib.suppress(Exception):
            auto_tokenizer()
        load.start_clock()
        try:
            hf = load_hf(source, name, offline=self._offline, hub_timeout_s=hub_timeout)
            loaded = LoadedTokenizer(name, hf)
        except (TokenizerError, UnavailableError) as exc:
            failure = self._failure(isinstance(exc, UnavailableError), exc.message)
        except Exception as exc:  # a tokenizer transformers loads but we cannot use
            log.exception("loading tokenizer %s failed", shown(name))
            # The type only: the message may quote the whole name; the log has the rest.
            failure = self._failure(
                False, f"cannot use tokenizer {shown(name)}: {type(exc).__name__}"
            )
        with self._lock:
            del self._loading[name]
            if loaded is not None:
                self._items[name] = loaded
                while len(self._items) > self._max_size:
                    self._items.popitem(last=False)
            elif failure is not None and self._failure_ttl_s > 0:
                self._failures[name] = failure
                while len(self._failures) > self._max_failures:
                    self._failures.popitem(last=False)
        if loaded is not None:
            load.future.set_result(loaded)
        else:
            assert failure is not None
            load.future.set_exception(_LoadFailed(failure))

    def _failure(self, unavailable: bool, message: str) -> _Failure:
        return _Failure(unavailable, message, time.monotonic() + self._failure_ttl_s)

    def _error(self, failure: _Failure, field: str) -> TokenizerError | UnavailableError:
        if not failure.unavailable:
            return TokenizerError(failure.message, field=field)
        # The next attempt at this name is when the failure expires: retry then.
        retry = max(1.0, math.ceil(failure.until - time.monotonic()))
        return UnavailableError(failure.message, field=field, retry_after_s=retry)

    def _still_loading(self, name: str, field: str) -> UnavailableError:
        return UnavailableError(
            f"tokenizer {shown(name)} is still loading after {self._load_timeout_s:g} s "
            "(JUDGE_TOKENIZER_LOAD_TIMEOUT_S); try again shortly",
            field=field,
            retry_after_s=_RETRY_LOADING_S,
        )


def _remaining(deadline: float) -> float | None:
    if math.isinf(deadline):
        return None
    return max(0.0, deadline - time.monotonic())


def _retrieve(future: asyncio.Future[LoadedTokenizer]) -> None:
    if not future.cancelled():
        future.exception()


_RETRY_LOADING_S = 5.0  # a load past its deadline: the hub is slow, not (yet) known down
