"""The judgment cache around `Engine`: look a judgment up by its cache key, store a fresh one.

The value is a `Judgment` (spans, rejections, usage, the transcript when the
judging request asked for one), never credit: each request applies its own
credit options to it (see `judge_service.judgment`). No rollout id is kept
(the key covers content, not names).

Only ``ok`` judgments are stored: a fallback is what a judge failure (often a
transient provider outage) left behind, and caching it would make the failure
permanent for that content.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from judge_service.errors import StoreUnavailable
from judge_service.judgment import Judgment
from judge_service.store.base import Store

log = logging.getLogger(__name__)

CacheState = Literal["hit", "miss", "bypass", "unavailable"]


@dataclass(frozen=True)
class Looked:
    """A rollout's cache read by the caller (a group's members, read as one set:
    `group.cached`): the judgment to serve (None: judge afresh), the state to report, and
    the session id to stamp on a fresh judgment, which then replaces any stored one."""

    judgment: Judgment | None
    state: CacheState
    session: str | None = None


class JudgmentCache:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def lookup(self, tenant: str, key: str) -> tuple[Judgment | None, CacheState]:
        try:
            data = await self.store.get_judgment(tenant, key)
        except StoreUnavailable as exc:
            log.warning("judgment cache unavailable, judging without it: %s", exc)
            return None, "unavailable"
        if data is None:
            return None, "miss"
        return Judgment.loads(data), "hit"

    async def save(
        self, tenant: str, key: str, judgment: Judgment, *, replace: bool = False
    ) -> CacheState:
        """`replace`: over a stored judgment (one kept without the transcript now asked for);
        otherwise the first judgment stored under a key stays."""
        if judgment.status != "ok":
            return "miss"
        try:
            await self.store.put_judgment(tenant, key, judgment.dumps(), replace=replace)
        except StoreUnavailable as exc:
            log.warning("judgment cache unavailable, result not stored: %s", exc)
            return "unavailable"
        return "miss"
