"""Prometheus metrics of this process, served at ``GET /metrics`` (a worker: ``--metrics-port``).

Counted once, where each thing happens: results by judge and status, latency,
judge tokens by kind (input, cache write, cache read, output), estimated cost,
span rejections, cache outcomes, the store's health, fallbacks by boundary, the
provider SDKs' retries and failures, and the jobs (queue, workers, reclaims).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from judge_service.schemas import Result

REGISTRY = CollectorRegistry(auto_describe=True)

RESULTS = Counter(
    "judge_results_total",
    "Rollouts judged, by the judge that produced the spans and the result status.",
    ["judge", "status"],
    registry=REGISTRY,
)
LATENCY = Histogram(
    "judge_rollout_latency_seconds",
    "Wall time to judge one rollout (decode, judge, validate, credit).",
    ["judge"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
    registry=REGISTRY,
)
TOKENS = Counter(
    "judge_llm_tokens_total",
    "Judge model tokens, by kind: input, cache_write, cache_read, output.",
    ["judge", "kind"],
    registry=REGISTRY,
)
COST = Counter(
    "judge_llm_cost_usd_total",
    "Estimated judge cost from the price table (priced models only).",
    ["judge"],
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
    "Rollouts whose judge failed, by the judge that was asked and the failure's boundary "
    "(provider, budget, tool, internal, ...).",
    ["judge", "boundary"],
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
JOBS_IN_FLIGHT = Gauge(
    "judge_jobs_in_flight",
    "Rollouts this process's worker is judging now.",
    registry=REGISTRY,
)

CONTENT_TYPE = CONTENT_TYPE_LATEST


def observe(result: Result, *, judged: bool = True) -> None:
    """Count one finished result; its rejections only when a judge ran (not a cache hit)."""
    if result.cache is not None:
        CACHE.labels(result.cache).inc()
        STORE_UP.set(0 if result.cache == "unavailable" else 1)
    info = result.judge
    name = info.name if info is not None else "none"
    RESULTS.labels(name, result.status).inc()
    if info is None:
        return
    LATENCY.labels(name).observe(info.latency_ms / 1000)
    for kind in ("input", "cache_write", "cache_read", "output"):
        value = getattr(info, f"{kind}_tokens")
        if value:
            TOKENS.labels(name, kind).inc(value)
    if info.cost_usd:
        COST.labels(name).inc(info.cost_usd)
    if judged:
        for rejected in result.rejected_spans:
            REJECTED.labels(name, rejected.code, str(rejected.round)).inc()


def exposition() -> bytes:
    return generate_latest(REGISTRY)
