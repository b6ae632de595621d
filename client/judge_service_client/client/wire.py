"""What the sync and async clients share: request bodies, the retry policy, error mapping
and merging the responses of a split batch. No I/O here."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np
from pydantic import BaseModel

from judge_service_client.client.errors import error_class
from judge_service_client.schemas import (
    BatchResponse,
    BatchStats,
    Options,
    Result,
    Rollout,
    UsageTotals,
)

RolloutLike = Rollout | Mapping[str, Any]
OptionsLike = Options | Mapping[str, Any] | None

DEFAULT_MAX_BATCH = 1024  # the server's default JUDGE_MAX_ROLLOUTS_PER_BATCH
RETRY_STATUSES = frozenset({429, 503})
FINAL_JOB_STATES = frozenset({"done", "failed", "cancelled"})


@dataclass(frozen=True)
class RetryPolicy:
    """429 and 503 are retried, waiting what ``retry-after`` says (else an exponential
    backoff), at most `max_attempts` sends and `max_wait_s` seconds of waiting in all: a
    wait that would pass that budget is not begun, and the error is raised at once. A
    request that got no answer (`dropped`) is sent again under the same budget."""

    max_attempts: int = 5
    max_wait_s: float = 60.0
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0

    def delay(self, response: httpx.Response, attempt: int, waited: float) -> float | None:
        """Seconds to wait before sending again, or None to give up (`attempt` counts
        from 1, `waited` is the time already spent waiting)."""
        if response.status_code not in RETRY_STATUSES or attempt >= self.max_attempts:
            return None
        hinted = retry_after(response)
        wait = (
            hinted
            if hinted is not None
            else min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        )
        return wait if waited + wait <= self.max_wait_s else None

    def dropped(self, error: httpx.TransportError, attempt: int, waited: float) -> float | None:
        """Seconds to wait before sending again a request that got no answer, or None to
        raise it: only when the connection failed or closed without a response (a load
        balancer's replica went away), never after a timeout (the server may still be
        judging it). Every call of this client is safe to send again: judging is a pure
        function of the request, and a job submission carries an idempotency key."""
        if not isinstance(error, _DROPPED) or attempt >= self.max_attempts:
            return None
        wait = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        return wait if waited + wait <= self.max_wait_s else None


# No answer came, and none is coming: the connection could not be made or was closed.
_DROPPED = (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


def headers(api_key: str | None) -> dict[str, str]:
    found = {"user-agent": "judge-service-client"}
    if api_key:
        found["authorization"] = f"Bearer {api_key}"
    return found


def retry_after(response: httpx.Response) -> float | None:
    """The ``retry-after`` header in seconds (delta-seconds or an HTTP date), if valid."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def raise_for_status(response: httpx.Response) -> None:
    """Raise the typed error for an error response, with the server's detail and field."""
    if response.is_success:
        return
    detail, field = response.reason_phrase or "error", None
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    if isinstance(body, dict):
        if isinstance(body.get("detail"), str):
            detail = body["detail"]
        elif body.get("detail") is not None:
            detail = json.dumps(body["detail"])[:1024]
        if isinstance(body.get("field"), str):
            field = body["field"]
    elif response.text:
        detail = response.text[:1024]
    cls = error_class(response.status_code)
    raise cls(
        response.status_code,
        detail,
        field=field,
        retry_after=retry_after(response),
        method=response.request.method,
        url=str(response.request.url),
    )


def as_wire(item: BaseModel | Mapping[str, Any]) -> Any:
    """A model as the server reads it (aliases, no unset fields); a mapping as given, so
    that a trainer's dicts of 8k ids are not validated twice."""
    if isinstance(item, BaseModel):
        return item.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return item


def options_body(options: OptionsLike) -> dict[str, Any]:
    return {} if options is None else {"options": as_wire(options)}


def chunks(rollouts: Sequence[RolloutLike], size: int) -> list[Sequence[RolloutLike]]:
    if size < 1:
        raise ValueError(f"max_batch must be >= 1, got {size}")
    return [rollouts[i : i + size] for i in range(0, len(rollouts), size)]


def merge(parts: Sequence[BatchResponse], latency_ms: int) -> BatchResponse:
    """One response for a batch sent in parts: results in order, usage and counts summed,
    the judge's share recomputed over the whole batch from the results' arrays."""
    if len(parts) == 1:
        return parts[0]
    usage = UsageTotals()
    counts: dict[str, int] = {}
    for part in parts:
        stats = part.stats
        usage.input_tokens += stats.usage.input_tokens
        usage.cache_write_tokens += stats.usage.cache_write_tokens
        usage.cache_read_tokens += stats.usage.cache_read_tokens
        usage.output_tokens += stats.usage.output_tokens
        if stats.usage.cost_usd is not None:
            usage.cost_usd = (usage.cost_usd or 0.0) + stats.usage.cost_usd
        for key, value in stats.counts.items():
            counts[key] = counts.get(key, 0) + value
    results = [result for part in parts for result in part.results]
    stats = BatchStats(
        judge_share=judge_share(results), usage=usage, counts=counts, latency_ms=latency_ms
    )
    return BatchResponse(results=results, stats=stats)


def judge_share(results: Sequence[Result]) -> float | None:
    """Σ|credit| / (Σ_i T_i·|A_i| + Σ|credit|), as the server computes it per request:
    A_i is read back from advantage - credit (the largest magnitude, as masked tokens
    carry 0)."""
    from judge_service_client.client.arrays import credit_array

    credit_mass = outcome_mass = 0.0
    for result in results:
        if result.status == "failed" or result.credit is None:
            continue
        credit = credit_array(result, "credit").astype(np.float64)
        credit_mass += float(np.abs(credit).sum())
        if result.advantage is not None and result.num_tokens:
            outcome = credit_array(result, "advantage").astype(np.float64) - credit
            outcome_mass += result.num_tokens * float(np.abs(outcome).max(initial=0.0))
    total = credit_mass + outcome_mass
    return credit_mass / total if total > 0 else None
