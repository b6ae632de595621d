"""`AsyncJudgeClient`: the service's API from asyncio code; the same calls as `JudgeClient`
(written once, in `calls.py`), carried out with ``await``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
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


class AsyncJudgeClient(BaseClient[httpx.AsyncBaseTransport]):
    """An asyncio client of one judge-service server: `JudgeClient`'s methods, awaited
    (``iter_results`` is an async iterator). Use as an async context manager, or call
    `aclose()`."""

    def _open(self, options: dict[str, Any], transport: httpx.AsyncBaseTransport | None) -> None:
        self._http = httpx.AsyncClient(**options, transport=transport)

    async def __aenter__(self) -> AsyncJudgeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _steps(self, steps: Steps[T]) -> AsyncIterator[Result]:
        for step in steps:
            if isinstance(step, Emit):
                yield step.result
            elif isinstance(step, Sleep):
                await asyncio.sleep(step.seconds)
            else:
                try:
                    steps.reply = await self._http.request(
                        step.method, step.path, json=step.json, params=step.params
                    )
                except httpx.TransportError as exc:
                    steps.reply = exc  # the call decides: send again, or raise it

    async def _run(self, call: Call[T]) -> T:
        steps = Steps(call)
        async for _ in self._steps(steps):
            pass
        return steps.value

    async def judge(
        self,
        rollout: RolloutLike,
        options: OptionsLike = None,
        *,
        group_rewards: Sequence[float] | None = None,
    ) -> Result:
        return await self._run(self._judge(rollout, options, group_rewards))

    async def judge_batch(
        self, rollouts: Sequence[RolloutLike], options: OptionsLike = None
    ) -> BatchResponse:
        return await self._run(self._judge_batch(rollouts, options))

    async def judge_group(
        self, rollouts: Sequence[RolloutLike], options: OptionsLike = None
    ) -> GroupResponse:
        return await self._run(self._judge_group(rollouts, options))

    async def submit_job(
        self,
        rollouts: Sequence[RolloutLike],
        options: OptionsLike = None,
        *,
        idempotency_key: str | None = None,
    ) -> JobCreated:
        return await self._run(self._submit_job(rollouts, options, idempotency_key))

    async def get_job(self, job_id: str) -> JobView:
        return await self._run(self._job("GET", job_id))

    async def cancel_job(self, job_id: str) -> JobView:
        return await self._run(self._job("DELETE", job_id))

    async def wait_job(
        self, job_id: str, *, timeout: float | None = None, poll_s: float = 0.5
    ) -> JobView:
        return await self._run(self._wait_job(job_id, timeout, poll_s))

    async def drift(self, *, points: int = 100) -> DriftReport:
        return await self._run(self._drift(points))

    async def pin_drift_baseline(
        self, judge: str, prompt_version: str | None = None
    ) -> DriftReport:
        return await self._run(self._pin_drift(judge, prompt_version))

    async def results_page(
        self, job_id: str, cursor: str | None = None, limit: int = 100
    ) -> JobResultsPage:
        return await self._run(self._results_page(job_id, cursor, limit))

    def iter_results(
        self,
        job_id: str,
        *,
        page_size: int = 100,
        poll_s: float = 0.5,
        timeout: float | None = None,
    ) -> AsyncIterator[Result]:
        return self._steps(Steps(self._iter_results(job_id, page_size, poll_s, timeout)))
