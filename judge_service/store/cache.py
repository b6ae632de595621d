"""The judgment cache around `Engine`: look a result up by its cache key, store a fresh one.

A cached judgment is kept in one canonical form, independent of the request
that produced it: credit as exact float64 runs (the ``spans`` encoding), no
advantage (it depends on the caller's group), no transcript, no rollout id (the
key covers content, not names). A hit is rebuilt for the asking request: its
id, its credit encoding, its advantage; usage reads zero because the hit cost
no judge tokens (the stored judgment at ``GET /v1/judgments/{key}`` keeps the
original usage).

Only ``ok`` results are stored: a fallback is what a judge failure (often a
transient provider outage) left behind, and caching it would make the failure
permanent for that content.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Literal

from judge_service import credit as credit_mod
from judge_service.credit import FloatArray
from judge_service.schemas import CreditEncoding, Result
from judge_service.store.base import Store, StoreUnavailable

log = logging.getLogger(__name__)

CacheState = Literal["hit", "miss", "bypass", "unavailable"]


def stored_form(result: Result, credit: FloatArray) -> str:
    data = result.model_dump(mode="json", exclude_none=True)
    for field in ("advantage", "transcript", "cache"):
        data.pop(field, None)
    data["credit"] = credit_mod.encode(credit, "spans")
    return json.dumps(data, separators=(",", ":"))


def _credit_of(data: dict[str, Any]) -> FloatArray:
    return credit_mod.decode(data.get("credit") or [], int(data.get("num_tokens", 0)), "spans")


def rebuild(
    data: str,
    rollout_id: str,
    encoding: CreditEncoding,
    advantage: float | None,
    began: float,
) -> tuple[Result, FloatArray]:
    """A stored judgment as the result of the current request (see the module docstring)."""
    stored = json.loads(data)
    values = _credit_of(stored)
    judge = stored.get("judge")
    if judge is not None:
        for field in ("input_tokens", "cache_write_tokens", "cache_read_tokens", "output_tokens"):
            judge[field] = 0
        if judge.get("cost_usd") is not None:
            judge["cost_usd"] = 0.0
        judge["latency_ms"] = round((time.perf_counter() - began) * 1000)
    stored["id"] = rollout_id
    stored["credit"] = credit_mod.encode(values, encoding)
    if advantage is not None:
        stored["advantage"] = credit_mod.encode(values + advantage, encoding)
    stored["cache"] = "hit"
    return Result.model_validate(stored), values


def as_encoded(data: str, encoding: CreditEncoding) -> Result:
    """A stored judgment as stored (original usage), its credit in `encoding`."""
    stored = json.loads(data)
    stored["credit"] = credit_mod.encode(_credit_of(stored), encoding)
    return Result.model_validate(stored)


class JudgmentCache:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def lookup(self, tenant: str, key: str) -> tuple[str | None, CacheState]:
        try:
            data = await self.store.get_judgment(tenant, key)
        except StoreUnavailable as exc:
            log.warning("judgment cache unavailable, judging without it: %s", exc)
            return None, "unavailable"
        return data, "hit" if data is not None else "miss"

    async def save(self, tenant: str, key: str, result: Result, credit: FloatArray) -> CacheState:
        if result.status != "ok":
            return "miss"
        try:
            await self.store.put_judgment(tenant, key, stored_form(result, credit))
        except StoreUnavailable as exc:
            log.warning("judgment cache unavailable, result not stored: %s", exc)
            return "unavailable"
        return "miss"
