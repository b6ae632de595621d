"""Prometheus metrics of this process, served at ``GET /metrics`` (a worker: ``--metrics-port``).

Counted once, where each thing happens: results by judge and status, queue
and judging time, judge tokens by provider, judge spec and kind (input, cache
write, cache read, output), estimated cost, span rejections, cache outcomes,
the store's health, judge sessions in flight and failed ones, fallbacks by boundary,
the provider SDKs' retries and failures, and the jobs (queue, consumer group, oldest
waiting rollout, workers, reclaims).

The ``judge`` label is a judge spec (``provider:model``), and specs are bounded
by the allow-list (``JUDGE_ALLOWED_JUDGES``) and the judge cache; ``provider``
is the spec's prefix. A fallback result is counted under the judge that was
asked for, and its tokens under the judge that spent them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from judge_service.schemas import Result

REGISTRY = CollectorRegistry(auto_describe=True)

RESULTS = Counter(
    "judge_results_total",
    "Rollouts judged, by the judge asked for (a fallback's spans come from the fallback "
    "judge) and the result status (ok, fallback, failed).",
    ["judge", "status"],
    registry=REGISTRY,
)
_SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
LATENCY = Histogram(
    "judge_rollout_latency_seconds",
    "Judging time of one rollout (judge.latency_ms: from holding a concurrency slot to the "
    "validated spans), by the judge asked for.",
    ["judge"],
    buckets=_SECONDS,
    registry=REGISTRY,
)
QUEUE = Histogram(
    "judge_rollout_queue_seconds",
    "Time a rollout waited for a concurrency slot (judge.queue_ms), by the judge asked for.",
    ["judge"],
    buckets=(0.001, *_SECONDS),
    registry=REGISTRY,
)
TOKENS = Counter(
    "judge_llm_tokens_total",
    "Judge model tokens, by provider, judge spec and kind: input, cache_write, cache_read, "
    "output (a failed attempt's under the judge that spent them).",
    ["provider", "judge", "kind"],
    registry=REGISTRY,
)
COST = Counter(
    "judge_llm_cost_usd_total",
    "Estimated judge cost from the price table (priced models only), failed attempts included.",
    ["provider", "judge"],
    registry=REGISTRY,
)
REJECTED = Counter(
    "judge_rejected_spans_total",
    "Spans the validation rejected, by code and round (1: first submission, 2: repair).",
    ["judge", "code", "round"],
    registry=REGISTRY,
)
CACHE = Counter(
    "judge_cache_lookups_total",
    "Judgment cache outcomes per judged rollout: hit, miss, bypass, unavailable.",
    ["state"],
    registry=REGISTRY,
)
STORE_UP = Gauge(
    "judge_store_up",
    "1 when the store (Redis or in-process) answered its last ping or operation, else 0.",
    registry=REGISTRY,
)
FALLBACKS = Counter(
    "judge_fallbacks_total",
    "Rollouts whose judge failed and fell back (rules or zero), by the judge that was asked "
    "and the failure's boundary (provider, budget, tool, internal, ...).",
    ["judge", "boundary"],
    registry=REGISTRY,
)
JUDGE_ERRORS = Counter(
    "judge_session_errors_total",
    "Judge sessions that ended without usable spans, by provider, judge spec, the error's "
    "boundary (provider, budget, tool, internal) and what the result became (fallback, "
    "failed: options.fallback none).",
    ["provider", "judge", "boundary", "outcome"],
    registry=REGISTRY,
)
PROVIDER_RETRIES = Counter(
    "judge_provider_retries_total",
    "Requests the provider SDK sent again (after a 429, a 5xx or a timeout).",
    ["judge"],
    registry=REGISTRY,
)
PROVIDER_ERRORS = Counter(
    "judge_provider_errors_total",
    "Provider responses that failed: 429 (rate limited) or 5xx.",
    ["judge", "status"],
    registry=REGISTRY,
)
PROVIDER_CAP_IGNORED = Counter(
    "judge_provider_output_cap_ignored_total",
    "Completions longer than the output cap sent (the server ignores the max-tokens field: "
    "see JUDGE_LLM_OPENAI_MAX_TOKENS_FIELD), by judge.",
    ["judge"],
    registry=REGISTRY,
)
JUDGES_CACHED = Gauge(
    "judge_judges_cached",
    "Judges (provider clients) held by this process (bounded: JUDGE_JUDGE_CACHE_SIZE).",
    registry=REGISTRY,
)

# Jobs. The queue's state (depth, pending, jobs, dead letters, heartbeat ages) is read
# from Redis every few seconds by each process that runs a worker, so every such process
# reports the same values (aggregate with max); the counters count this process's work.
JOBS_QUEUED = Gauge(
    "judge_jobs_queue_depth",
    "Rollouts queued and not yet delivered to any worker.",
    registry=REGISTRY,
)
JOBS_PENDING = Gauge(
    "judge_jobs_pending",
    "Rollouts delivered to a worker and not finished, by consumer (worker name).",
    ["consumer"],
    registry=REGISTRY,
)
JOBS = Gauge(
    "judge_jobs",
    "Jobs by status: queued, running, cancelling, and done, failed, cancelled (kept for "
    "JUDGE_JOB_TTL_S).",
    ["status"],
    registry=REGISTRY,
)
JOBS_DEAD_LETTERS = Gauge(
    "judge_jobs_dead_letters",
    "Records in the dead-letter list (the newest 10,000 are kept).",
    registry=REGISTRY,
)
JOBS_HEARTBEAT_AGE = Gauge(
    "judge_jobs_heartbeat_age_seconds",
    "Seconds since each worker's last heartbeat; past JUDGE_JOBS_DEAD_AFTER_S it is dead.",
    ["consumer"],
    registry=REGISTRY,
)
JOBS_RECLAIMS = Counter(
    "judge_jobs_reclaims_total",
    "Rollouts this worker took over from another, by reason: dead_consumer (a stale "
    "heartbeat), idle (no heartbeat record; idle past JUDGE_JOBS_RECLAIM_IDLE_S).",
    ["reason"],
    registry=REGISTRY,
)
JOBS_RETRIES = Counter(
    "judge_jobs_retries_total",
    "Deliveries whose processing raised, delivered again at once by this worker.",
    registry=REGISTRY,
)
JOBS_DEAD_LETTERED = Counter(
    "judge_jobs_dead_lettered_total",
    "Rollouts this worker sent to the dead-letter list.",
    registry=REGISTRY,
)
# What autoscalers read (docs/serving.md "Scaling and alerts"): KEDA's redis-streams scaler
# reads the same two numbers off the stream itself; these let Prometheus alert on them.
JOBS_GROUP_PENDING = Gauge(
    "judge_jobs_group_pending",
    "Rollouts delivered and not finished, over every consumer of the group (XPENDING's count: "
    "what KEDA's pendingEntriesCount reads).",
    ["group"],
    registry=REGISTRY,
)
JOBS_GROUP_LAG = Gauge(
    "judge_jobs_group_lag",
    "Rollouts in the stream the group has not yet read (XINFO GROUPS lag: what KEDA's "
    "lagCount reads; equal to judge_jobs_queue_depth).",
    ["group"],
    registry=REGISTRY,
)
JOBS_OLDEST_PENDING_AGE = Gauge(
    "judge_jobs_oldest_pending_age_seconds",
    "Seconds since the oldest rollout still being judged was queued (0 when none is).",
    registry=REGISTRY,
)
JOBS_OLDEST_QUEUED_AGE = Gauge(
    "judge_jobs_oldest_queued_age_seconds",
    "Seconds the oldest rollout not yet delivered to any worker has waited (0 when none has).",
    registry=REGISTRY,
)
SESSIONS_IN_FLIGHT = Gauge(
    "judge_sessions_in_flight",
    "Judge sessions running in this process now, by provider (the judge spec's prefix: "
    "anthropic, openai, rules, value, ...).",
    ["provider"],
    registry=REGISTRY,
)
JOBS_IN_FLIGHT = Gauge(
    "judge_jobs_in_flight",
    "Rollouts this process's worker is judging now.",
    registry=REGISTRY,
)

CONTENT_TYPE = CONTENT_TYPE_LATEST

M = TypeVar("M", Counter, Gauge, Histogram)
# Each metric's children by label values, as `labels()` returns them: the same child every
# time (nothing here removes one), found by one dict lookup instead of `labels()`'s
# validation and lock (five calls a result were 3% of a small rollout's request).
_CHILDREN: dict[tuple[Any, ...], Any] = {}


def _child(metric: M, *values: str) -> M:
    """`metric.labels(*values)`, looked up once per metric and label values."""
    key = (id(metric), *values)
    try:
        child: M = _CHILDREN[key]
    except KeyError:
        child = _CHILDREN[key] = metric.labels(*values)
    return child


def provider_of(judge: str) -> str:
    """``openai`` of ``openai:<model>``; a judge without a model is its own provider."""
    return judge.partition(":")[0]


@contextmanager
def session(judge: str) -> Iterator[None]:
    """Count one judge session in flight for as long as the block runs."""
    gauge = _child(SESSIONS_IN_FLIGHT, provider_of(judge))
    gauge.inc()
    try:
        yield
    finally:
        gauge.dec()


def judge_failed(judge: str, boundary: str, fallback: str) -> None:
    """Count a judge session that ended without usable spans, and the fallback it led to."""
    outcome = "failed" if fallback == "none" else "fallback"
    JUDGE_ERRORS.labels(provider_of(judge), judge, boundary, outcome).inc()
    if outcome == "fallback":
        FALLBACKS.labels(judge, boundary).inc()


def observe(result: Result, *, judged: bool = True) -> None:
    """Count one finished result; its rejections only when a judge ran (not a cache hit)."""
    if result.cache is not None:
        _child(CACHE, result.cache).inc()
        STORE_UP.set(0 if result.cache == "unavailable" else 1)
    info = result.judge
    asked = "none" if info is None else info.attempt.name if info.attempt else info.name
    _child(RESULTS, asked, result.status).inc()
    if info is None:
        return
    _child(LATENCY, asked).observe(info.latency_ms / 1000)
    _child(QUEUE, asked).observe(info.queue_ms / 1000)
    for spent in (info, info.attempt):
        if spent is None:
            continue
        provider = provider_of(spent.name)
        for kind in ("input", "cache_write", "cache_read", "output"):
            value = getattr(spent, f"{kind}_tokens")
            if value:
                _child(TOKENS, provider, spent.name, kind).inc(value)
        if spent.cost_usd:
            _child(COST, provider, spent.name).inc(spent.cost_usd)
    if judged:
        for rejected in result.rejected_spans:
            _child(REJECTED, info.name, rejected.code, str(rejected.round)).inc()


def exposition() -> bytes:
    return generate_latest(REGISTRY)
