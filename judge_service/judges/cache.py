"""Which judges a request may name, and the judges this process keeps built.

``options.judge`` comes from the caller, but an LLM judge spends the
operator's key and holds an HTTP client: any caller naming any model (or a
new model string per request) must not pick models on that key, multiply
memory or outlive a bounded cache. So:

* a spec must match one of ``JUDGE_ALLOWED_JUDGES`` (fnmatch patterns of
  ``provider:model``; default: the configured default judge and ``rules``),
  else the request is a 422 naming ``options.judge`` — before anything is built;
* built judges live in an LRU of ``JUDGE_JUDGE_CACHE_SIZE``; an evicted judge is
  closed (its HTTP client) once no rollout is using it any more, and every
  judge is closed at shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence

from judge_service import metrics
from judge_service.errors import InputError
from judge_service.judges.base import Judge

log = logging.getLogger(__name__)


def allowed(spec: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(spec, pattern) for pattern in patterns)


class JudgeCache:
    def __init__(
        self, build: Callable[[str], Judge], patterns: Sequence[str], max_size: int
    ) -> None:
        self._build = build
        self.patterns = tuple(patterns)
        self.max_size = max_size
        self._judges: OrderedDict[str, Judge] = OrderedDict()
        self._users: dict[int, int] = {}  # id(judge) -> rollouts using it now
        self._retired: dict[int, Judge] = {}  # evicted while in use: closed when released
        self._closing: set[asyncio.Task[None]] = set()  # kept referenced until done

    def __len__(self) -> int:
        return len(self._judges)

    def get(self, spec: str, *, by_server: bool = False) -> Judge:
        """The judge for `spec` (built on first use); InputError if a request may not name it
        (`by_server`: the service's own choice, such as the rules fallback)."""
        if not by_server and not allowed(spec, self.patterns):
            shown = spec if len(spec) <= 80 else spec[:77] + "..."
            raise InputError(
                f"judge {shown!r} is not allowed on this server; allowed: "
                f"{', '.join(self.patterns)} (JUDGE_ALLOWED_JUDGES)",
                field="options.judge",
            )
        judge = self._judges.get(spec)
        if judge is None:
            judge = self._build(spec)
            self._judges[spec] = judge
            while len(self._judges) > self.max_size:
                _, evicted = self._judges.popitem(last=False)
                self._retire(evicted)
            metrics.JUDGES_CACHED.set(len(self._judges))
        else:
            self._judges.move_to_end(spec)
        return judge

    @contextlib.asynccontextmanager
    async def using(self, judge: Judge) -> AsyncIterator[Judge]:
        """Marks `judge` in use for the block, so eviction never closes it under a rollout."""
        key = id(judge)
        self._users[key] = self._users.get(key, 0) + 1
        try:
            yield judge
        finally:
            self._users[key] -= 1
            if not self._users[key]:
                del self._users[key]
                retired = self._retired.pop(key, None)
                if retired is not None:
                    await _close(retired)

    def _retire(self, judge: Judge) -> None:
        if self._users.get(id(judge)):
            self._retired[id(judge)] = judge
        else:
            with contextlib.suppress(RuntimeError):  # no running loop: nothing to close on
                task = asyncio.get_running_loop().create_task(_close(judge))
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """Close every judge (shutdown)."""
        judges = [*self._judges.values(), *self._retired.values()]
        self._judges.clear()
        self._retired.clear()
        metrics.JUDGES_CACHED.set(0)
        for judge in judges:
            await _close(judge)


async def _close(judge: Judge) -> None:
    close = getattr(judge, "aclose", None)
    if close is None:
        return
    try:
        await close()
    except Exception:  # closing a client must never take the service down
        log.warning("closing judge %s failed", judge.name, exc_info=True)
