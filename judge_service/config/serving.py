"""Settings of serving: the sandbox behind the judge's tools, the store, jobs and workers,
API keys."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import BaseModel, Field, field_validator, model_validator
from pydantic_settings import NoDecode

from judge_service.config.parsing import split_csv
from judge_service.store.redis_url import check_redis_url


class SandboxSettings(BaseModel):
    """Limits of the judge's run_python and check_equivalence tools; a model's tool
    arguments never change them."""

    # Without the OS layer sympy is refused: `sympy.sympify` evaluates strings with eval,
    # which no import filter can stop (sandbox/policy.py).
    sandbox_isolation: Literal["auto", "require", "off"] = Field(
        default="auto",
        description="the sandbox's OS isolation (namespaces, read-only root, non-root uid): "
        "`auto` uses it where it can be built, else refuses sympy; `require` fails without "
        "it; `off` never builds it",
    )
    sandbox_timeout_s: float = Field(
        default=5.0, gt=0, le=120, description="wall clock per `run_python` run"
    )
    sandbox_memory_mb: int = Field(
        default=256, ge=32, le=16384, description="memory per run, on top of the zygote"
    )
    sandbox_pool_size: int = Field(
        default=2, ge=1, le=64, description="concurrent runs (warm zygotes)"
    )
    sandbox_max_output_chars: int = Field(
        default=16_000, ge=256, description="printed text kept per run"
    )
    equivalence_timeout_s: float = Field(
        default=5.0, gt=0, le=120, description="wall clock per `check_equivalence` call"
    )
    equivalence_pool_size: int = Field(
        default=1, ge=1, le=64, description="concurrent `check_equivalence` calls"
    )


class StoreSettings(BaseModel):
    """The store: Redis when redis_url is set, else in-process; caches and their TTLs."""

    redis_url: str | None = Field(
        default=None,
        description="e.g. `redis://:password@host:6379/0`, `rediss://` for TLS; through "
        "Sentinel: `redis+sentinel://[:password@]host1:26379,host2:26379/service[/db]`",
        json_schema_extra={"default_doc": "unset (in-process)"},
    )
    redis_prefix: str = Field(
        default="judge",
        min_length=1,
        max_length=64,
        description="key prefix: one per deployment sharing a Redis",
    )
    redis_timeout_s: float = Field(
        default=2.0, gt=0, le=60, description="socket timeout; a dead Redis fails fast"
    )
    cache_ttl_s: int = Field(
        default=30 * 86400,
        ge=60,
        description="judged results, by cache key",
        json_schema_extra={"default_doc": "2592000 (30 days)"},
    )
    job_ttl_s: int = Field(
        default=7 * 86400,
        ge=60,
        description="a job and its results, after its last write",
        json_schema_extra={"default_doc": "604800 (7 days)"},
    )
    memory_cache_mb: int = Field(
        default=256, ge=1, description="the in-process store's result cache"
    )
    redis_wait_replicas: int = Field(
        default=0,
        ge=0,
        le=16,
        description="a job is accepted only once this many replicas hold it (Redis `WAIT`); "
        "with Sentinel set 1, or a failover can lose a job just accepted",
    )
    redis_wait_timeout_ms: int = Field(
        default=1000, ge=1, le=60_000, description="how long job creation waits for them (then 503)"
    )

    @field_validator("redis_url")
    @classmethod
    def _connectable(cls, url: str | None) -> str | None:
        if url:
            check_redis_url(url)
        return url

    @model_validator(mode="after")
    def _wait_within_socket_timeout(self) -> Self:
        if self.redis_wait_replicas and self.redis_wait_timeout_ms >= self.redis_timeout_s * 1000:
            raise ValueError(
                "redis_wait_timeout_ms must be shorter than redis_timeout_s: the socket would "
                "time out before WAIT answers"
            )
        return self


class JobSettings(BaseModel):
    """Jobs, workers and failover (judge_service/jobs/)."""

    max_rollouts_per_job: int = Field(default=100_000, ge=1, description="larger jobs are a 413")
    worker_concurrency: int | None = Field(
        default=None,
        ge=1,
        description="rollouts in flight per worker",
        json_schema_extra={"default_doc": "`JUDGE_MAX_CONCURRENCY`"},
    )
    # Kubernetes' terminationGracePeriodSeconds must cover it plus the hand-back (the
    # Helm chart's check, deploy/check.py, holds the two together).
    worker_drain_s: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="on SIGTERM a worker stops claiming and lets in-flight rollouts finish "
        "this long; the rest go back to the queue",
    )
    # Rollouts of a worker that left no heartbeat record are taken over after
    # jobs_reclaim_idle_s, which must exceed jobs_max_deadline_s, so that even then a live
    # worker's slowest session is never handed to a second worker.
    jobs_max_deadline_s: float = Field(
        default=300.0,
        gt=0,
        le=3600,
        description="the largest `options.deadline_s` a job may set",
    )
    jobs_reclaim_idle_s: float = Field(
        default=600.0,
        gt=0,
        description="rollouts of a worker with no heartbeat record are taken over after this "
        "long; must exceed `JUDGE_JOBS_MAX_DEADLINE_S`",
    )
    jobs_max_deliveries: int = Field(
        default=3, ge=1, le=100, description="then the dead-letter list"
    )
    # Every worker heartbeats every dead_after/5 s, so a dead one is found in seconds and
    # the reclaim time above is only the last resort.
    jobs_dead_after_s: float = Field(
        default=5.0,
        ge=1.0,
        le=600,
        description="a worker whose heartbeat is older is dead; its rollouts are taken over "
        "at once",
    )
    inprocess_worker: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="`serve` judges jobs itself: `auto` (unless a separate worker has a fresh "
        "heartbeat), `on`, `off` (a deployment with `judge-service worker` processes)",
    )

    @model_validator(mode="after")
    def _reclaim_after_deadline(self) -> Self:
        if self.jobs_reclaim_idle_s <= self.jobs_max_deadline_s:
            raise ValueError(
                f"jobs_reclaim_idle_s ({self.jobs_reclaim_idle_s}) must exceed "
                f"jobs_max_deadline_s ({self.jobs_max_deadline_s}): a live worker's rollout "
                "would be taken over and judged twice"
            )
        return self


class APISettings(BaseModel):
    """API keys (unset: open) and the per-key request limit."""

    api_keys: Annotated[list[str] | None, NoDecode] = Field(
        default=None,
        description="comma-separated bearer keys; each sees only its own jobs and judgments",
        json_schema_extra={"default_doc": "unset (open)"},
    )
    api_rate_limit_rpm: float | None = Field(
        default=None,
        gt=0,
        description="requests per minute per key (429 with `retry-after`)",
        json_schema_extra={"default_doc": "unset (none)"},
    )
    api_rate_limit_burst: int | None = Field(
        default=None,
        ge=1,
        description="requests a key may make at once before the rate applies",
        json_schema_extra={"default_doc": "10 s of the rate"},
    )

    @field_validator("api_keys", mode="before")
    @classmethod
    def _api_csv(cls, value: object) -> object:
        return split_csv(value)
