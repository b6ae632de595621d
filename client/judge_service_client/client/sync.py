"""`JudgeClient`: the service's API from blocking code (a trainer's reward function). The
calls themselves are in `calls.py`; this class only sends, sleeps and yields."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from judge_service_client.audit import DriftReport
from judge_service_client.client.calls import BaseClient, Call, Emit, Sleep, Steps, T
from judge_service_client.client.wire import OptionsLike, RolloutLike
from judge_service_client.schemas import (
    BatchResponse,
    GroupResponse,
    JobCreated,
    JobResultsPage,
    JobView,
    Result,
)


class JudgeClient(BaseClient[httpx.BaseTransport]):
    """A client of one judge-service server, for blocking code; the arguments are
    `BaseClient`'s. Use as a context manager, or call `close()`."""

    def _open(self, options: dict[str, Any], transport: httpx.BaseTransport | None) -> None:
        self._http = httpx.Client(**options, transport=transport)

    def __enter__(self) -> JudgeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _steps(self, steps: Steps[T]) -> Iterator[Result]:
        for step in steps:
            if isinstance(step, Emit):
                yield step.result
            elif isinstance(step, Sleep):
                time.sleep(step.seconds)
            else:
                try:
                    steps.reply = self._http.request(
                        step.method, step.path, json=step.json, params=step.params
                    )
                except httpx.TransportError as exc:
                    steps.reply = exc  # the call decides: send again, or raise it

    def _run(self, call: Call[T]) -> T:
        steps = Steps(call)
        for _ in self._steps(steps):
            pass
        return steps.value

    def judge(
        self,
        rollout: RolloutLike,
        options: OptionsLike = None,
        *,
        group_rewards: Sequence[float] | None = None,
    ) -> Result:
        """Judge one rollout (POST /v1/judge)."""
        return self._run(self._judge(rollout, options, group_rewards))

    def judge_batch(
        self, rollouts: Sequence[RolloutLike], options: OptionsLike = None
    ) -> BatchResponse:
        """Judge rollouts (POST /v1/judge/batch), in parts of at most `max_batch`; one
        result per rollout, in order. Group advantages are computed per part, so keep a
        group within one part (groups are usually contiguous and the limit large)."""
        return self._run(self._judge_batch(rollouts, options))

    def judge_group(
        self, rollouts: Sequence[RolloutLike], options: OptionsLike = None
    ) -> GroupResponse:
        """Judge the G rollouts of one prompt together (POST /v1/judge/group): each
        rollout's result as in a batch, plus the group block (divergence points; in an
        equal-reward group, a ranking and zero-sum scores)."""
        return self._run(self._judge_group(rollouts, options))

    def submit_job(
        self,
        rollouts: Sequence[RolloutLike],
        options: OptionsLike = None,
        *,
        idempotency_key: str | None = None,
    ) -> JobCreated:
        """Queue rollouts for judging (POST /v1/jobs); returns at once with the job's id.
        Without `idempotency_key` the client makes one, so its own retries never queue the
        rollouts twice; pass your own to re-send the job after a crash, or after a Redis
        failover lost a job just accepted (GET answers 404): the same key creates it once."""
        return self._run(self._submit_job(rollouts, options, idempotency_key))

    def get_job(self, job_id: str) -> JobView:
        return self._run(self._job("GET", job_id))

    def cancel_job(self, job_id: str) -> JobView:
        return self._run(self._job("DELETE", job_id))

    def wait_job(
        self, job_id: str, *, timeout: float | None = None, poll_s: float = 0.5
    ) -> JobView:
        """Poll until the job is done, failed or cancelled; JobTimeoutError after `timeout`."""
        return self._run(self._wait_job(job_id, timeout, poll_s))

    def drift(self, *, points: int = 100) -> DriftReport:
        """The drift audit of the judges this key's rollouts were judged by
        (``GET /v1/audit/drift``): ``.verdict`` is the worst of ``ok``, ``drifting``, ``bad``."""
        return self._run(self._drift(points))

    def pin_drift_baseline(self, judge: str, prompt_version: str | None = None) -> DriftReport:
        """Make `judge`'s current window its drift baseline (``POST /v1/audit/drift/baseline``)."""
        return self._run(self._pin_drift(judge, prompt_version))

    def results_page(
        self, job_id: str, cursor: str | None = None, limit: int = 100
    ) -> JobResultsPage:
        return self._run(self._results_page(job_id, cursor, limit))

    def iter_results(
        self,
        job_id: str,
        *,
        page_size: int = 100,
        poll_s: float = 0.5,
        timeout: float | None = None,
    ) -> Iterator[Result]:
        """Every result of the job in input order, following ``next_cursor``; a page that
        stops at a rollout not judged yet is polled again after `poll_s`."""
        return self._steps(Steps(self._iter_results(job_id, page_size, poll_s, timeout)))
