"""JUDGE_REDIS_WAIT_REPLICAS: a job is accepted (202) only once that many replicas hold it.

Against the shared Redis, which has no replica, every creation waits in vain and is
answered 503 naming the replicas; the client retries that 503 with the idempotency key
it made for the submission, so however often it retries, one job exists, not one per
try. The Sentinel failover test shows the other half: with replicas, what WAIT refused
is never lost (tests/test_jobs_sentinel.py).
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from judge_service.api.app import create_app
from judge_service.client import JudgeClient, RetryPolicy, ServiceUnavailableError
from judge_service.config import Settings
from tests.conftest import EXAMPLES, LiveServer
from tests.redis_support import shared_redis

pytestmark = pytest.mark.redis


def test_an_unreplicated_job_is_refused_and_its_retries_make_one_job(
    example_rollouts: list[dict[str, Any]],
) -> None:
    with shared_redis() as (url, prefix):
        settings = Settings(
            redis_url=url,
            redis_prefix=prefix,
            tokenizer_roots=[str(EXAMPLES)],
            inprocess_worker="off",
            redis_wait_replicas=1,
            redis_wait_timeout_ms=50,
        )
        retry = RetryPolicy(max_attempts=3, backoff_s=0.01, max_backoff_s=0.01)
        with LiveServer(create_app(settings)) as live, JudgeClient(live.url, retry=retry) as c:
            with pytest.raises(ServiceUnavailableError, match="0 of 1 replica"):
                c.submit_job(example_rollouts[:2])
            with pytest.raises(ServiceUnavailableError):
                c.submit_job(example_rollouts[:2])
        store = redis.Redis.from_url(url, decode_responses=True)
        try:
            jobs = [k for k in store.scan_iter(f"{prefix}:job:*") if k.count(":") == 2]
            keys = list(store.scan_iter(f"{prefix}:idem:*"))
        finally:
            store.close()
        # Two submissions, three sends each: two jobs, each under its own client-made key.
        assert len(jobs) == 2, jobs
        assert len(keys) == 2, keys
